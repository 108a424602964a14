package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"
)

// PackageChart packages the chart in dir as `helm package` does (Helm's own loader and writer:
// .helmignore, validation, the same entries and gzip header) and returns the archive's file name
// (<name>-<version>.tgz) and bytes. Helm stamps every entry with the time it writes it; here every
// entry carries mtime instead, so the same chart gives the same bytes.
func PackageChart(dir string, mtime time.Time) (string, []byte, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", nil, fmt.Errorf("loading the chart %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp("", "chart-*")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	file, err := chartutil.Save(ch, tmp)
	if err != nil {
		return "", nil, fmt.Errorf("packaging the chart %s: %w", dir, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	fixed, err := restampTarGz(data, mtime)
	if err != nil {
		return "", nil, fmt.Errorf("packaging the chart %s: %w", dir, err)
	}
	return filepath.Base(file), fixed, nil
}

// restampTarGz rewrites a gzip-compressed tar archive with mtime as every entry's time, owner root,
// and the gzip header's name, comment and extra field kept but no time.
func restampTarGz(data []byte, mtime time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Header = gzip.Header{Comment: zr.Comment, Extra: zr.Extra, Name: zr.Name, OS: zr.OS}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	mtime = mtime.UTC().Truncate(time.Second)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		out := &tar.Header{Typeflag: hdr.Typeflag, Name: hdr.Name, Mode: hdr.Mode, Size: hdr.Size, ModTime: mtime, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(out); err != nil {
			return nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil { //nolint:gosec // our own chart, read whole anyway
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// InstallOptions say how install.yaml renders the chart.
type InstallOptions struct {
	// Release is the release name the chart is rendered for (the objects' names derive from it).
	Release string
	// Namespace is the namespace the operator runs in; install.yaml creates it.
	Namespace string
	// KubeVersion is the Kubernetes version the render assumes (the chart's kubeVersion must
	// accept it); nothing else in the chart depends on it.
	KubeVersion string
}

// allowedHooks are the hooks install.yaml may leave out: they run on `helm uninstall` and `helm
// test`, which `kubectl apply` has no moment for. A hook of an install or upgrade would be a part
// of the installation that a plain render loses, so RenderInstall refuses it.
var allowedHooks = map[release.HookEvent]bool{release.HookPostDelete: true, release.HookTest: true}

// RenderInstall renders the packaged chart (PackageChart's bytes) with its default values for
// `kubectl apply -f`: a Namespace object for o.Namespace first, then the release's objects in Helm's
// install order (CRDs included, since the chart templates them). The render is Helm's client-only
// one, as `helm template` does: `lookup` finds nothing and the API versions are Kubernetes' own
// (so certManager.enabled auto means the operator's self-managed webhook certificate, and
// defaultNodeHealthCheck stays off). Hooks are left out: the uninstall cleanup and `helm test`
// (docs/release.md says what replaces them); a hook of any other event is an error. The aggregated
// ClusterRole is written without rules: kube-controller-manager fills them, and `rules: []` would
// empty them again at every apply.
func RenderInstall(ctx context.Context, chartArchive []byte, o InstallOptions) ([]byte, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(chartArchive))
	if err != nil {
		return nil, fmt.Errorf("loading the packaged chart: %w", err)
	}
	kv, err := chartutil.ParseKubeVersion(o.KubeVersion)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes version %q: %w", o.KubeVersion, err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace, inst.KubeVersion = o.Release, o.Namespace, kv
	rel, err := inst.RunWithContext(ctx, ch, map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	for _, h := range rel.Hooks {
		for _, e := range h.Events {
			if !allowedHooks[e] {
				return nil, fmt.Errorf("%s (%s) is a %s hook, which install.yaml cannot run", h.Name, h.Path, e)
			}
		}
	}
	ns, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{
		"name": o.Namespace,
		// The operator's pods meet the restricted Pod Security Standard (test/realnode checks it).
		"labels": map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}})
	if err != nil {
		return nil, err
	}
	out := bytes.NewBufferString("# The node-healthcheck chart " + ch.Metadata.Version + " rendered with its defaults as release " + o.Release +
		" in namespace " + o.Namespace + ": kubectl apply -f install.yaml (docs/release.md).\n---\n")
	out.Write(ns)
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		doc = strings.TrimSpace(strings.TrimPrefix(doc, "---\n"))
		if doc == "" {
			continue
		}
		if doc, err = dropAggregatedRules(doc); err != nil {
			return nil, err
		}
		out.WriteString("---\n" + doc + "\n")
	}
	return out.Bytes(), nil
}

// dropAggregatedRules returns doc without its rules when it is a ClusterRole with an
// aggregationRule (rewritten as YAML, its `# Source` comment kept), and unchanged otherwise.
func dropAggregatedRules(doc string) (string, error) {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return "", fmt.Errorf("reading a rendered object: %w", err)
	}
	if obj["kind"] != "ClusterRole" || obj["aggregationRule"] == nil {
		return doc, nil
	}
	delete(obj, "rules")
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	var comments []string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "#") {
			comments = append(comments, line)
		}
	}
	return strings.TrimSpace(strings.Join(append(comments, string(data)), "\n")), nil
}

// chartMetadata returns the packaged chart's Chart.yaml.
func chartMetadata(chartArchive []byte) (*chart.Metadata, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(chartArchive))
	if err != nil {
		return nil, fmt.Errorf("loading the packaged chart: %w", err)
	}
	return ch.Metadata, nil
}
