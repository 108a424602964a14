package watch

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestConfigureManagerStripsManagedFields(t *testing.T) {
	o := ctrl.Options{}
	ConfigureManager(&o)
	if o.Cache.DefaultTransform == nil {
		t.Fatal("no default transform for the cache")
	}
	cr := &unstructured.Unstructured{}
	cr.SetName("worker-1")
	cr.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "node-healthcheck", Operation: metav1.ManagedFieldsOperationUpdate}})
	out, err := o.Cache.DefaultTransform(cr)
	if err != nil {
		t.Fatal(err)
	}
	if mf := out.(*unstructured.Unstructured).GetManagedFields(); len(mf) != 0 || out.(*unstructured.Unstructured).GetName() != "worker-1" {
		t.Fatalf("cached CR keeps managedFields %v (or lost its name)", mf)
	}

	// A default transform the caller set stays: this one keeps managedFields.
	o = ctrl.Options{}
	o.Cache.DefaultTransform = func(obj any) (any, error) { return obj, nil }
	ConfigureManager(&o)
	cr.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "node-healthcheck"}})
	if out, _ := o.Cache.DefaultTransform(cr); len(out.(*unstructured.Unstructured).GetManagedFields()) != 1 {
		t.Fatal("ConfigureManager replaced a default transform the caller set")
	}
}
