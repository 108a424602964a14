package v1alpha1

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/controller/decodeguard"
)

// ValidatingWebhook returns the validating webhook served at ValidatePath. It is controller-runtime's
// typed validator webhook (admission.WithValidator) for v, except for a stored object that does not
// decode into the Go type: an integer or duration its field cannot hold, written before the CRD
// bounded it or while the webhook was off. The typed webhook refuses every UPDATE and DELETE of such
// an object, since it cannot decode the old object, so it could be neither fixed nor deleted. Here an
// UPDATE is validated on its own (every rule but those that compare it with the stored version) and a
// DELETE by the stored status alone (refused while it lists running remediations); both carry a
// warning that names the object and the decode error. A new object
// that does not decode is refused, naming the offending fields.
func ValidatingWebhook(scheme *runtime.Scheme, v *Validator) *admission.Webhook {
	return &admission.Webhook{Handler: &validatingHandler{
		validator: v,
		typed:     admission.WithValidator[*remediationv1alpha1.NodeHealthCheck](scheme, v).Handler,
		decoder:   admission.NewDecoder(scheme),
	}}
}

// validatingHandler hands every request to controller-runtime's typed validator handler once both
// objects are known to decode, and handles the stored object that does not itself.
type validatingHandler struct {
	validator *Validator
	typed     admission.Handler
	decoder   admission.Decoder
}

// maxDecodeErrorRunes bounds the decode error quoted in a warning or refusal: enough for the field
// paths and values of a few broken fields, short enough that the API server, which truncates a
// request's warnings beyond 4096 characters in all, passes it on whole.
const maxDecodeErrorRunes = 512

// storedStatus decodes the status of a stored object alone; false when it does not decode either.
func storedStatus(raw runtime.RawExtension) (remediationv1alpha1.NodeHealthCheckStatus, bool) {
	var obj struct {
		Status *remediationv1alpha1.NodeHealthCheckStatus `json:"status"`
	}
	if err := utiljson.Unmarshal(raw.Raw, &obj); err != nil || obj.Status == nil {
		return remediationv1alpha1.NodeHealthCheckStatus{}, err == nil
	}
	return *obj.Status, true
}

// decodeError says why raw did not decode, naming the offending fields as decodeguard does in the
// operator's InvalidSpec event ("spec.healthyDelay: time: invalid duration ..."), cut to
// maxDecodeErrorRunes. err is the decoder's error, used when the fields cannot be told.
func decodeError(raw runtime.RawExtension, err error) string {
	msg := err.Error()
	u := &unstructured.Unstructured{}
	if jsonErr := utiljson.Unmarshal(raw.Raw, &u.Object); jsonErr == nil {
		if _, located := decodeguard.Decode(u); located != nil {
			msg = located.Error()
		}
	}
	if r := []rune(msg); len(r) > maxDecodeErrorRunes {
		msg = string(r[:maxDecodeErrorRunes]) + "..."
	}
	return msg
}

// nhcResource names NodeHealthChecks in Forbidden refusals.
var nhcResource = remediationv1alpha1.GroupVersion.WithResource("nodehealthchecks").GroupResource()

// Handle implements admission.Handler.
func (h *validatingHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	newNHC := &remediationv1alpha1.NodeHealthCheck{}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if err := h.decoder.Decode(req, newNHC); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("NodeHealthCheck %s cannot be decoded: %s", req.Name, decodeError(req.Object, err)))
		}
	}
	hasOld := (req.Operation == admissionv1.Update || req.Operation == admissionv1.Delete) && len(req.OldObject.Raw) > 0
	if !hasOld {
		return h.typed.Handle(ctx, req)
	}
	oldErr := h.decoder.DecodeRaw(req.OldObject, &remediationv1alpha1.NodeHealthCheck{})
	if oldErr == nil {
		return h.typed.Handle(ctx, req)
	}

	reason := decodeError(req.OldObject, oldErr)
	ctrl.LoggerFrom(ctx).Info("Stored NodeHealthCheck cannot be decoded; validating the request without it", "operation", req.Operation, "error", reason)
	if req.Operation == admissionv1.Delete {
		// The spec is what does not decode; the status, written by the operator, usually does, and
		// says whether remediations run.
		if stored, ok := storedStatus(req.OldObject); ok {
			if err := ValidateDelete(&remediationv1alpha1.NodeHealthCheck{ObjectMeta: metav1.ObjectMeta{Name: req.Name}, Status: stored}); err != nil {
				return admission.Errored(http.StatusForbidden, apierrors.NewForbidden(nhcResource, req.Name, err)).WithWarnings(
					fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); its status still tells running remediations", req.Name, reason))
			}
			return admission.Allowed("").WithWarnings(fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
				"deletion allowed: its status lists no running remediation", req.Name, reason))
		}
		return admission.Allowed("").WithWarnings(fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
			"deletion allowed without checking for running remediations", req.Name, reason))
	}
	warnings, err := h.validator.validateUpdateAlone(admission.NewContextWithRequest(ctx, req), newNHC)
	warnings = append(warnings, fmt.Sprintf("NodeHealthCheck %s: the stored version could not be decoded (%s); "+
		"the update was validated on its own, without the rules that compare it with the stored version", req.Name, reason))
	if err == nil {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	// As the typed handler answers an error.
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		status := apiStatus.Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &status}}.WithWarnings(warnings...)
	}
	return admission.Denied(err.Error()).WithWarnings(warnings...)
}
