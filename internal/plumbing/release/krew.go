package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// KrewAPIVersion is the API version of krew's plugin manifests.
const KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"

// PluginArchive is the kubectl plugin's archive for one platform.
type PluginArchive struct {
	// OS and Arch are the platform, as GOOS and GOARCH (and krew's selector labels) name them.
	OS, Arch string
	// Name is the archive's file name.
	Name string
	// Bin is the plugin's path in the archive (kubectl-nhc, kubectl-nhc.exe on Windows).
	Bin string
	// SHA256 is the archive's SHA-256, in hex.
	SHA256 string
}

// KrewPlugin is krew's Plugin manifest (the fields this plugin uses), as krew-index holds them.
type KrewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   KrewMetadata   `json:"metadata"`
	Spec       KrewPluginSpec `json:"spec"`
}

// KrewMetadata names the plugin: `kubectl krew install <name>`.
type KrewMetadata struct {
	Name string `json:"name"`
}

// KrewPluginSpec is the plugin's version, description and one platform per archive.
type KrewPluginSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one archive: krew installs the first platform whose selector matches the machine.
type KrewPlatform struct {
	Selector KrewSelector `json:"selector"`
	URI      string       `json:"uri"`
	SHA256   string       `json:"sha256"`
	Bin      string       `json:"bin"`
	Files    []KrewFile   `json:"files"`
}

// KrewSelector selects the machines of a platform by krew's os and arch labels.
type KrewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// KrewFile is what krew copies out of the archive into the plugin's folder.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// KrewManifest returns the plugin's krew manifest for version (without a leading v; krew wants
// one) with one platform per archive, each downloaded from uriBase + "/" + its name and checked
// against its SHA-256; platforms in the order os, arch.
func KrewManifest(version, uriBase string, archives []PluginArchive) ([]byte, error) {
	sorted := append([]PluginArchive(nil), archives...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].OS != sorted[j].OS {
			return sorted[i].OS < sorted[j].OS
		}
		return sorted[i].Arch < sorted[j].Arch
	})
	p := KrewPlugin{APIVersion: KrewAPIVersion, Kind: "Plugin", Metadata: KrewMetadata{Name: "nhc"}, Spec: KrewPluginSpec{
		Version:          "v" + strings.TrimPrefix(version, "v"),
		Homepage:         "https://github.com/medik8s/node-healthcheck",
		ShortDescription: "Explain NodeHealthCheck decisions about nodes",
		Description: "Explains, from the cluster's state, what the Node Healthcheck operator decides about a node or a\n" +
			"NodeHealthCheck and why (healthy, unhealthy since when, remediation held by which brake), with the\n" +
			"operator's own decision code; requests a remediation of a node where a NodeHealthCheck allows it.\n",
	}}
	for _, a := range sorted {
		p.Spec.Platforms = append(p.Spec.Platforms, KrewPlatform{
			Selector: KrewSelector{MatchLabels: map[string]string{"os": a.OS, "arch": a.Arch}},
			URI:      strings.TrimSuffix(uriBase, "/") + "/" + a.Name,
			SHA256:   a.SHA256,
			Bin:      a.Bin,
			Files:    []KrewFile{{From: a.Bin, To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	if len(p.Spec.Platforms) == 0 {
		return nil, fmt.Errorf("a krew manifest needs at least one platform")
	}
	return yaml.Marshal(p)
}

// Checksums returns the SHA-256 of each file of dir in sha256sum's format ("<hex>  <name>"), by
// name, so that `sha256sum -c` checks them in that folder.
func Checksums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s in %s is not a file", e.Name(), dir)
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return []byte(b.String()), nil
}

// fileSHA256 returns the SHA-256 of the file's content, in hex.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
