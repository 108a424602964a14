package targets

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/machines"
	"github.com/medik8s/node-healthcheck/internal/templateaccess"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// TestUnreadableKindsAreUnknown reads, through a real cache of a real API server, a template and a
// Cluster API Machine whose kinds cannot be listed in the version read (their conversion webhook is
// down): neither read waits for the cache, the template disables with RemediationTemplateUnavailable
// naming the API server's error, and the node that claims the Machine counts as a control-plane node
// of unknown status (its control-plane starts are held), never as a worker.
func TestUnreadableKindsAreUnknown(t *testing.T) {
	cfg := testutil.StartControlPlane(t)
	scheme := testutil.Scheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Cluster API's Machine gets a second version, which the API server prefers, converted by a
	// webhook that is down; the Machine is stored in the first. A template kind likewise.
	down := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ConversionReviewVersions: []string{"v1"}, ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")}}}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	must(k8s.Get(ctx, client.ObjectKey{Name: "machines.cluster.x-k8s.io"}, crd))
	second := crd.Spec.Versions[0]
	second.Name, second.Storage = "v1beta2", false
	crd.Spec.Versions = append(crd.Spec.Versions, second)
	crd.Spec.Conversion = down
	must(k8s.Update(ctx, crd))
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}
	must(k8s.Create(ctx, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "unreadableremediationtemplates.unreadable.medik8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "unreadable.medik8s.io", Scope: apiextensionsv1.NamespaceScoped, Conversion: down,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "UnreadableRemediationTemplate", ListKind: "UnreadableRemediationTemplateList",
				Plural: "unreadableremediationtemplates"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: open},
				{Name: "v2", Served: true, Schema: open}}},
	}))
	// Each new version is served (a list of it answers) before anything is stored; then every
	// object is stored in the version that needs no conversion, and lists of the other fail.
	list := func(apiVersion, kind string) error {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind + "List")
		return k8s.List(ctx, l)
	}
	poll := func(done func() bool) {
		t.Helper()
		must(wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return done(), nil }))
	}
	for _, o := range []struct {
		read, stored, kind, namespace, name string
		fields                              map[string]any
	}{
		{"cluster.x-k8s.io/v1beta2", "cluster.x-k8s.io/v1beta1", "Machine", "default", "m1",
			map[string]any{"status": map[string]any{"nodeRef": map[string]any{"name": "w1"}}}},
		{"unreadable.medik8s.io/v2", "unreadable.medik8s.io/v1", "UnreadableRemediationTemplate", testutil.TemplateNamespace, "t1",
			map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}},
	} {
		poll(func() bool { return list(o.read, o.kind) == nil })
		u := &unstructured.Unstructured{Object: o.fields}
		u.SetAPIVersion(o.stored)
		u.SetKind(o.kind)
		u.SetNamespace(o.namespace)
		u.SetName(o.name)
		must(k8s.Create(ctx, u))
		poll(func() bool {
			err := list(o.read, o.kind)
			return err != nil && strings.Contains(err.Error(), "conversion webhook")
		})
	}
	// A mapper that learns the kinds now: the API server prefers the versions that need the webhook.
	fresh, err := client.New(cfg, client.Options{Scheme: scheme})
	must(err)
	mapper := fresh.RESTMapper()

	c, err := cache.New(cfg, cache.Options{Scheme: scheme, Mapper: mapper})
	must(err)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, Cache: &client.CacheOptions{Reader: c, Unstructured: true}})
	must(err)
	synced := &KindSync{Informers: c, APIReader: k8s}

	// Reads that waited for the cache would end only at this deadline.
	start := time.Now()
	ctx, cancelReads := context.WithTimeout(ctx, 3*KindSyncWait+15*time.Second)
	defer cancelReads()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Annotations: map[string]string{
		machines.ClusterAPIMachineAnnotation: "m1", machines.ClusterAPINamespaceAnnotation: "default"}}}
	g := &Gatherer{Reader: k8s, Machines: &Machines{Reader: cached, Mapper: mapper, Synced: synced}}
	cp, unknown, err := controlPlaneOf(node, g.machineLink(ctx, node))
	switch {
	case err != nil:
		t.Errorf("reading the Machine: %v; want no error, the control-plane status unknown", err)
	case !cp || !strings.Contains(unknown, "whether node w1 is a control-plane node is unknown") || !strings.Contains(unknown, "conversion webhook"):
		t.Errorf("control plane %v, unknown %q: want true, why, with the API server's error", cp, unknown)
	}

	templates := &templateaccess.Reader{Cached: cached, Direct: k8s, Reviewer: k8s, Mapper: mapper, Synced: synced}
	spec := remediationv1alpha1.NodeHealthCheckSpec{RemediationTemplate: &corev1.ObjectReference{
		APIVersion: "unreadable.medik8s.io/v2", Kind: "UnreadableRemediationTemplate", Namespace: testutil.TemplateNamespace, Name: "t1"}}
	problem, err := CheckTemplates(ctx, templates, &spec, false)
	switch {
	case err != nil:
		t.Errorf("checking the template: %v; want no error, a problem", err)
	case problem == nil || problem.Reason != remediationv1alpha1.ConditionReasonDisabledTemplateUnavailable ||
		!strings.Contains(problem.Message, "UnreadableRemediationTemplate default/t1 cannot be read") || !strings.Contains(problem.Message, "conversion webhook"):
		t.Errorf("problem %+v: want %s naming the template and the API server's error", problem, remediationv1alpha1.ConditionReasonDisabledTemplateUnavailable)
	}
	// Each kind waits for its first sync at most KindSyncWait, once.
	if took := time.Since(start); took > 2*KindSyncWait+10*time.Second {
		t.Errorf("the reads took %s", took)
	}
}
