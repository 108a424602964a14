package testutil

import (
	"encoding/json"
	"net/http"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ConvertUnchanged is a CRD conversion webhook for kinds whose versions hold the same fields: it
// answers a ConversionReview with every object in the desired version, unchanged otherwise (the
// suites that take a remediator's conversion webhook down across a leader change serve it).
func ConvertUnchanged(rw http.ResponseWriter, req *http.Request) {
	review := apiextensionsv1.ConversionReview{}
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		obj := map[string]any{}
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		converted, err := json.Marshal(obj)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: converted})
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}
