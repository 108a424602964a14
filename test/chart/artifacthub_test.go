package chart

import (
	"context"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// artifactHub is what the chart's artifacthub.io annotations say (ArtifactHub's format: each
// annotation a YAML document in a string).
type artifactHub struct {
	crds []struct {
		Kind, Version, Name, DisplayName, Description string
	}
	examples []map[string]any
	images   []struct{ Name, Image string }
	links    []struct{ Name, URL string }
	// changes are ArtifactHub's structured form: kind and description.
	changes []struct{ Kind, Description string }
	license string
}

// parseArtifactHub reads the annotations of Chart.yaml, refusing a field ArtifactHub does not know.
func parseArtifactHub(t *testing.T) artifactHub {
	t.Helper()
	a := loadChart(t).Metadata.Annotations
	var h artifactHub
	for key, into := range map[string]any{
		"artifacthub.io/crds":         &h.crds,
		"artifacthub.io/crdsExamples": &h.examples,
		"artifacthub.io/images":       &h.images,
		"artifacthub.io/links":        &h.links,
		"artifacthub.io/changes":      &h.changes,
	} {
		raw, ok := a[key]
		if !ok {
			t.Errorf("Chart.yaml lacks the annotation %s", key)
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(raw), into); err != nil {
			t.Errorf("%s does not parse: %v", key, err)
		}
	}
	h.license = a["artifacthub.io/license"]
	return h
}

// chartCRDs returns the CRDs the chart ships (files/crds).
func chartCRDs(t *testing.T) []apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var out []apiextensionsv1.CustomResourceDefinition
	for _, f := range loadChart(t).Files {
		if filepath.Dir(f.Name) != "files/crds" {
			continue
		}
		crd := apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(f.Data, &crd); err != nil {
			t.Fatal(err)
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		t.Fatal("the chart ships no CRD")
	}
	return out
}

// The ArtifactHub annotations parse and agree with the chart: every CRD it ships is listed with a
// version it serves, and nothing else; the image is the one the default values run; the examples
// are of a listed kind; links are absolute URLs; changes are of ArtifactHub's kinds; the license
// stays.
func TestArtifactHubAnnotations(t *testing.T) {
	h := parseArtifactHub(t)
	if h.license != "Apache-2.0" {
		t.Errorf("artifacthub.io/license %q", h.license)
	}
	crds := chartCRDs(t)
	if len(h.crds) != len(crds) {
		t.Errorf("artifacthub.io/crds lists %d CRDs, the chart ships %d", len(h.crds), len(crds))
	}
	listed := map[string]bool{}
	for _, c := range h.crds {
		if c.DisplayName == "" || c.Description == "" {
			t.Errorf("CRD %s: no displayName or description", c.Name)
		}
		i := slices.IndexFunc(crds, func(crd apiextensionsv1.CustomResourceDefinition) bool { return crd.Name == c.Name })
		if i < 0 {
			t.Errorf("artifacthub.io/crds lists %s, which the chart does not ship", c.Name)
			continue
		}
		crd := crds[i]
		if crd.Spec.Names.Kind != c.Kind || !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == c.Version && v.Served }) {
			t.Errorf("artifacthub.io/crds: %s %s %s; the CRD is %s, versions %+v", c.Name, c.Kind, c.Version, crd.Spec.Names.Kind, crd.Spec.Versions)
		}
		listed[crd.Spec.Group+"/"+c.Version+"/"+c.Kind] = true
	}
	if len(h.examples) == 0 {
		t.Error("artifacthub.io/crdsExamples is empty")
	}
	for _, e := range h.examples {
		u := unstructured.Unstructured{Object: e}
		if !listed[u.GetAPIVersion()+"/"+u.GetKind()] {
			t.Errorf("example %s is a %s %s, not a listed CRD's", u.GetName(), u.GetAPIVersion(), u.GetKind())
		}
	}

	image := podSpec(t, mustRender(t, nil)).Containers[0].Image
	if len(h.images) != 1 || h.images[0].Image != image {
		t.Errorf("artifacthub.io/images %+v; the default values run %s", h.images, image)
	}
	for _, l := range h.links {
		if u, err := url.Parse(l.URL); l.Name == "" || err != nil || u.Scheme != "https" || u.Host == "" {
			t.Errorf("link %+v", l)
		}
	}
	for _, c := range h.changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, c.Kind) || c.Description == "" {
			t.Errorf("change %+v: kind must be one of ArtifactHub's, with a description", c)
		}
	}
}

// Every ArtifactHub example is admitted by a real API server with the chart's CRD (a dry-run
// create with strict field validation: its schema, unknown fields and CEL rules), and the check
// refuses an example the CRD refuses.
func TestArtifactHubExamplesAreValid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	t.Parallel() // its own control plane
	c := startCluster(t)
	if _, err := envtest.InstallCRDs(c.env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(chartDir(), "files", "crds")}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h := parseArtifactHub(t)
	for _, e := range h.examples {
		u := &unstructured.Unstructured{Object: e}
		if err := c.k8s.Create(ctx, u.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("example %s: %v", u.GetName(), err)
		}
		bad := u.DeepCopy()
		if err := unstructured.SetNestedField(bad.Object, "150%", "spec", "minHealthy"); err != nil {
			t.Fatal(err)
		}
		if err := c.k8s.Create(ctx, bad, client.DryRunAll); err == nil {
			t.Errorf("example %s with minHealthy 150%% was admitted: the check is void", u.GetName())
		}
	}
}
