package v1alpha1_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// crdValidator runs the generated CRD's OpenAPI constraints and CEL rules in process, with the API
// server's own libraries, so fuzz targets can compare them with the webhook at thousands of inputs a
// second. The envtest suite checks the same rules against a real API server.
type crdValidator struct {
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator
}

var (
	crdValidatorOnce sync.Once
	crdValidatorVal  *crdValidator
	crdValidatorErr  error
)

func loadCRDValidator() (*crdValidator, error) {
	crdValidatorOnce.Do(func() {
		crd, err := testutil.LoadNHCCRD()
		if err != nil {
			crdValidatorErr = err
			return
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
			crdValidatorErr = err
			return
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			crdValidatorErr = err
			return
		}
		sv, _, err := validation.NewSchemaValidator(internal)
		if err != nil {
			crdValidatorErr = err
			return
		}
		crdValidatorVal = &crdValidator{structural: s, schema: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
	})
	return crdValidatorVal, crdValidatorErr
}

// validate returns what the API server would refuse of the JSON object, OpenAPI and CEL errors
// together (the API server skips CEL when OpenAPI fails; here both always run).
func (v *crdValidator) validate(ctx context.Context, raw []byte) (field.ErrorList, error) {
	// The API server decodes numbers as int64 where they are integral; so does utiljson.
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return v.validateObject(ctx, obj, nil), nil
}

// validateObject validates obj, on an update against oldObj (nil on create, which skips the
// transition rules), as the API server's custom resource strategy does, except that CEL always runs.
func (v *crdValidator) validateObject(ctx context.Context, obj, oldObj map[string]any) field.ErrorList {
	errs := validation.ValidateCustomResource(nil, obj, v.schema)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	var old any
	if oldObj != nil {
		old = oldObj
	}
	celErrs, _ := v.cel.Validate(ctx, nil, v.structural, obj, old, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// coerce does to a decoded request body what the API server does before admission: it drops fields
// the schema does not know and nulls of fields that are not nullable, then applies the schema's
// defaults.
func (v *crdValidator) coerce(obj map[string]any) {
	pruning.Prune(obj, v.structural, true)
	defaulting.PruneNonNullableNullsWithoutDefaults(obj, v.structural)
	defaulting.Default(obj, v.structural)
}

// TestCRDIsValid validates the generated CRD as the API server does when it is installed, including
// the estimated cost of every CEL rule, so a rule over the budget fails here without a control plane.
func TestCRDIsValid(t *testing.T) {
	crd, err := testutil.LoadNHCCRD()
	if err != nil {
		t.Fatal(err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	for _, e := range apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), internal) {
		t.Error(e)
	}
}

// TestCRDRulesCompileOnTheOldestSupportedKubernetes compiles every CEL rule and messageExpression of
// the generated CRD in the CEL environment of the oldest API server the chart supports (Chart.yaml's
// kubeVersion). An API server of minor version N accepts a new rule only if it compiles in the
// environment of N-1 (environment.DefaultCompatibilityVersion), so a function added to Kubernetes' CEL
// later (a list's distinct(), two-variable comprehensions, the format library) would keep the CRD
// from installing there. TestCRDIsValid checks the costs, with this module's API server version.
func TestCRDRulesCompileOnTheOldestSupportedKubernetes(t *testing.T) {
	chart, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^kubeVersion:\s*"?>=\s*1\.(\d+)`).FindSubmatch(chart)
	if m == nil {
		t.Fatal(`Chart.yaml has no kubeVersion ">=1.<minor>"`)
	}
	minor, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	envSet := environment.MustBaseEnvSet(version.MajorMinor(1, uint(minor-1)))

	crd, err := testutil.LoadNHCCRD()
	if err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	root, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	compiled := 0
	var walk func(path string, s *structuralschema.Structural)
	walk = func(path string, s *structuralschema.Structural) {
		if len(s.XValidations) > 0 {
			results, err := cel.Compile(s, model.SchemaDeclType(s, s.XEmbeddedResource), celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for i, r := range results {
				compiled++
				if r.Error != nil {
					t.Errorf("%s: rule %q does not compile on Kubernetes 1.%d: %v", path, s.XValidations[i].Rule, minor, r.Error)
				}
				if r.MessageExpressionError != nil {
					t.Errorf("%s: messageExpression %q does not compile on Kubernetes 1.%d: %v", path, s.XValidations[i].MessageExpression, minor, r.MessageExpressionError)
				}
			}
		}
		for name, p := range s.Properties {
			walk(path+"."+name, &p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
			walk(path+"{}", s.AdditionalProperties.Structural)
		}
	}
	walk("", root)
	if compiled == 0 {
		t.Fatal("found no CEL rules in the CRD")
	}
}
