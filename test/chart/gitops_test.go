package chart

import (
	"context"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	remediationv1alpha1 "github.com/medik8s/node-healthcheck/api/v1alpha1"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// defaultNHC returns the default NodeHealthCheck of a release and whether it is a hook (nil when the
// release has none).
func defaultNHC(t *testing.T, rel *release.Release) (*unstructured.Unstructured, bool) {
	t.Helper()
	parse := func(m string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, m)
		}
		if u.GetKind() == "NodeHealthCheck" && u.GetName() == "nhc-worker-default" {
			return u
		}
		return nil
	}
	for _, h := range rel.Hooks {
		if u := parse(h.Manifest); u != nil {
			return u, true
		}
	}
	for _, m := range releaseutil.SplitManifests(rel.Manifest) {
		if u := parse(m); u != nil {
			return u, false
		}
	}
	return nil, false
}

// GitOps tools render with `helm template`, where lookup finds nothing: defaultNodeHealthCheck.hook
// false renders the default NodeHealthCheck as a plain object of the release, the same spec as the
// hook's, with Argo CD's ordering annotations instead of Helm's hook.
func TestDefaultNodeHealthCheckAsAPlainObject(t *testing.T) {
	renderNHC := func(hook any) (*unstructured.Unstructured, bool) {
		t.Helper()
		v := map[string]any{"enabled": true}
		if hook != nil {
			v["hook"] = hook
		}
		rel, err := dryRun(t, loadChart(t), releaseName, namespace, map[string]any{"defaultNodeHealthCheck": v})
		if err != nil {
			t.Fatal(err)
		}
		u, isHook := defaultNHC(t, rel)
		if u == nil {
			t.Fatalf("hook %v: no default NodeHealthCheck", hook)
		}
		return u, isHook
	}
	byDefault, isHook := renderNHC(nil)
	if !isHook || byDefault.GetAnnotations()["helm.sh/hook"] != "post-install" {
		t.Errorf("by default the default NodeHealthCheck is a post-install hook: hook %v, annotations %v", isHook, byDefault.GetAnnotations())
	}
	plain, isHook := renderNHC(false)
	if isHook {
		t.Fatal("hook false: the default NodeHealthCheck is still a hook")
	}
	want := map[string]string{"argocd.argoproj.io/sync-wave": "1", "argocd.argoproj.io/sync-options": "SkipDryRunOnMissingResource=true"}
	if got := plain.GetAnnotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("hook false: annotations %v, want %v", got, want)
	}
	if !reflect.DeepEqual(plain.Object["spec"], byDefault.Object["spec"]) {
		t.Errorf("hook false changes the spec:\n%s\nwant\n%s", toYAML(t, plain), toYAML(t, byDefault))
	}
	if _, err := render(t, map[string]any{"defaultNodeHealthCheck": map[string]any{"hook": "no"}}); err == nil {
		t.Error("defaultNodeHealthCheck.hook \"no\" is accepted; the schema wants a boolean")
	}
}

// On a real API server, defaultNodeHealthCheck.hook false makes the default NodeHealthCheck an
// object of the release: applied whatever other NodeHealthChecks exist (no lookup), deleted on
// uninstall. Helm (so Flux's helm-controller too) installs it only once the CRD is served: a first
// install that brings the CRD in its templates is refused as Helm refuses any custom resource whose
// CRD is not served yet (docs/gitops.md). The hook, created after the CRD, works on a first install.
func TestDefaultNodeHealthCheckOfTheRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	c := startCluster(t)
	base := map[string]any{"webhooks": map[string]any{"enabled": false}, "certManager": map[string]any{"enabled": false}}
	values := map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true, "hook": false}}
	maps.Copy(values, base)
	ctx := context.Background()
	get := func() (*remediationv1alpha1.NodeHealthCheck, error) {
		nhc := &remediationv1alpha1.NodeHealthCheck{}
		return nhc, c.k8s.Get(ctx, client.ObjectKey{Name: "nhc-worker-default"}, nhc)
	}

	install := action.NewInstall(c.helm(t))
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Timeout = releaseName, namespace, true, time.Minute
	if _, err := install.Run(loadChart(t), values); err == nil || !strings.Contains(err.Error(), "ensure CRDs are installed first") {
		t.Fatalf("a first install with the CRD and the default NodeHealthCheck as a plain object: got %v, want Helm's refusal", err)
	}

	// As a hook, on a cluster that does not serve the CRD yet: nothing to look up.
	hooked := map[string]any{"defaultNodeHealthCheck": map[string]any{"enabled": true}}
	maps.Copy(hooked, base)
	c.install(t, hooked)
	nhc, err := get()
	if err != nil {
		t.Fatalf("a first install with the CRD and the default NodeHealthCheck as a hook: %v", err)
	}
	c.uninstall(t)
	if err := c.k8s.Delete(ctx, nhc); err != nil {
		t.Fatalf("uninstall leaves the hook's NodeHealthCheck: %v", err)
	}

	other := testutil.NewNHC("someone-elses")
	if err := c.k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	c.install(t, values)
	nhc, err = get()
	if err != nil {
		t.Fatalf("another NodeHealthCheck exists, and the default one of the release is not created (a lookup?): %v", err)
	}
	if nhc.Annotations["meta.helm.sh/release-name"] != releaseName || nhc.Annotations["helm.sh/hook"] != "" {
		t.Errorf("the default NodeHealthCheck is not a plain object of the release: annotations %v", nhc.Annotations)
	}

	c.uninstall(t)
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Errorf("uninstall left the default NodeHealthCheck of the release: %v", err)
	}
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(other), other); err != nil {
		t.Errorf("uninstall deleted a NodeHealthCheck not of the release: %v", err)
	}
}
