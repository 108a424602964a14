// Package image checks the operator's image as `make image` built it (bin/image, an OCI layout):
// what the chart deploys. It reads the image with go-containerregistry, not with the code that wrote
// it, and checks it against the chart, the Makefile and the Dockerfile.
package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/medik8s/node-healthcheck/internal/testutil"
)

const (
	user       = "65532:65532"
	entrypoint = "/manager"
)

// machines are the platforms an image may have, each with the ELF machine its manager must be built
// for.
var machines = map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}

// releasePlatforms are the released image's platforms (`make image`, the Makefile's PLATFORMS).
var releasePlatforms = []string{"linux/amd64", "linux/arm64"}

// platformsEnv names the platforms the image under test was built for: `make test` checks the image
// for this machine alone (`make image-host`), `make test-extended` and the release the multi-arch one.
const platformsEnv = "IMAGE_PLATFORMS"

// wantPlatforms returns the platforms the image must hold exactly: IMAGE_PLATFORMS (space
// separated, each one the release has); without it, this machine's for the image `make image-host`
// builds, else the release's.
func wantPlatforms(t *testing.T) []string {
	t.Helper()
	want := releasePlatforms
	if v := os.Getenv(platformsEnv); v != "" {
		want = strings.Fields(v)
	} else if dir, err := testutil.ImageLayout(); err == nil && dir == testutil.HostImageLayout() {
		want = []string{runtime.GOOS + "/" + runtime.GOARCH}
	}
	for _, p := range want {
		if !slices.Contains(releasePlatforms, p) {
			t.Fatalf("%s=%q names %s, which the release does not build (%v)", platformsEnv, os.Getenv(platformsEnv), p, releasePlatforms)
		}
	}
	return slices.Sorted(slices.Values(want))
}

// chartMeta is what the image takes from the chart's Chart.yaml.
type chartMeta struct {
	Name        string            `json:"name"`
	AppVersion  string            `json:"appVersion"`
	Home        string            `json:"home"`
	Annotations map[string]string `json:"annotations"`
}

func readChart(t *testing.T) chartMeta {
	t.Helper()
	data, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c chartMeta
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if c.AppVersion == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	return c
}

// builtImage returns the image index that the layout lists, and the name (tag) it lists it under.
func builtImage(t *testing.T) (v1.ImageIndex, string) {
	t.Helper()
	idx, tag, _ := builtLayout(t)
	return idx, tag
}

// builtLayout reads the layout's index.json: one OCI image index, named by its tag, and beside it
// only unnamed artifact manifests (returned as descriptors), nothing else.
func builtLayout(t *testing.T) (v1.ImageIndex, string, []v1.Descriptor) {
	t.Helper()
	dir, err := testutil.ImageLayout()
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var (
		index     *v1.Descriptor
		artifacts []v1.Descriptor
	)
	for i, d := range m.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex && index == nil:
			index = &m.Manifests[i]
		case d.MediaType == types.OCIManifestSchema1 && d.ArtifactType != "" && d.Annotations["org.opencontainers.image.ref.name"] == "":
			artifacts = append(artifacts, d)
		default:
			t.Fatalf("the layout's index.json should list one OCI image index and unnamed artifacts, it lists %+v", m.Manifests)
		}
	}
	if index == nil {
		t.Fatalf("the layout's index.json lists no OCI image index: %+v", m.Manifests)
	}
	idx, err := top.ImageIndex(index.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx, index.Annotations["org.opencontainers.image.ref.name"], artifacts
}

// layoutBlob reads a blob of the layout.
func layoutBlob(t *testing.T, h v1.Hash) []byte {
	t.Helper()
	dir, err := testutil.ImageLayout()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "blobs", h.Algorithm, h.Hex))
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := v1.SHA256(bytes.NewReader(data)); got != h {
		t.Fatalf("blob %s holds content of digest %s", h, got)
	}
	return data
}

// images returns the index's images by platform.
func images(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

// files returns the headers of the image's flattened file system, and the manager's contents.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, []byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	headers := map[string]*tar.Header{}
	var manager []byte
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, manager
		}
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + strings.TrimPrefix(hdr.Name, "/")
		headers[name] = hdr
		if name == entrypoint {
			if manager, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The index holds exactly the platforms built (the release: linux/amd64 and linux/arm64), as OCI
// manifests, under the chart's appVersion.
func TestIndexHoldsExactlyThePlatformsBuilt(t *testing.T) {
	idx, tag := builtImage(t)
	if want := readChart(t).AppVersion; tag != want {
		t.Errorf("the layout names the image %q, want the chart's appVersion %q", tag, want)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: media type %s, want %s", d.Platform, d.MediaType, types.OCIManifestSchema1)
		}
		got = append(got, d.Platform.String())
	}
	slices.Sort(got)
	if want := wantPlatforms(t); !slices.Equal(got, want) {
		t.Errorf("platforms %v, want exactly %v", got, want)
	}
}

// Each platform's image runs /manager as 65532:65532, carries the OCI labels (version: the chart's
// appVersion; source, title and licenses: the chart's; revision: a commit of this repository;
// created: the config's time), and holds nothing but the manager: no shell, no base image.
func TestEachImageIsTheManagerAloneRunAsNonRoot(t *testing.T) {
	idx, _ := builtImage(t)
	chrt := readChart(t)
	for platform, img := range images(t, idx) {
		t.Run(platform, func(t *testing.T) {
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.OS+"/"+cfg.Architecture != platform {
				t.Errorf("config platform %s/%s", cfg.OS, cfg.Architecture)
			}
			c := cfg.Config
			if c.User != user {
				t.Errorf("user %q, want %q", c.User, user)
			}
			if !slices.Equal(c.Entrypoint, []string{entrypoint}) || len(c.Cmd) != 0 || len(c.Shell) != 0 {
				t.Errorf("entrypoint %q, cmd %q, shell %q: want entrypoint [%s] alone", c.Entrypoint, c.Cmd, c.Shell, entrypoint)
			}
			for label, want := range map[string]string{
				"org.opencontainers.image.version":  chrt.AppVersion,
				"org.opencontainers.image.title":    chrt.Name,
				"org.opencontainers.image.source":   chrt.Home,
				"org.opencontainers.image.licenses": chrt.Annotations["artifacthub.io/license"],
				"org.opencontainers.image.created":  cfg.Created.UTC().Format(time.RFC3339),
			} {
				if got := c.Labels[label]; got != want || want == "" {
					t.Errorf("label %s=%q, want %q", label, got, want)
				}
			}
			rev := c.Labels["org.opencontainers.image.revision"]
			if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(rev) {
				t.Errorf("revision label %q is not a commit", rev)
			} else if out, err := exec.Command("git", "-C", testutil.RepoRoot(), "cat-file", "-t", rev).Output(); err != nil || strings.TrimSpace(string(out)) != "commit" {
				t.Errorf("revision label %s is not a commit of this repository: %v", rev, err)
			}

			headers, _ := files(t, img)
			var names []string
			for name := range headers {
				names = append(names, name)
			}
			if !slices.Equal(names, []string{entrypoint}) {
				t.Fatalf("the image holds %v, want %s alone (no shell, no base)", names, entrypoint)
			}
			hdr := headers[entrypoint]
			if hdr.Typeflag != tar.TypeReg || hdr.Mode&0o777 != 0o755 || hdr.Uid != 0 {
				t.Errorf("%s: type %c, mode %o, owner %d: want a regular file, executable by all, root's (the user cannot change it)", entrypoint, hdr.Typeflag, hdr.Mode, hdr.Uid)
			}
		})
	}
}

// Each manager is a static ELF executable for its platform's architecture: no program interpreter,
// no dynamic section, no shared libraries. An empty image has no libc to load.
func TestManagerIsAStaticBinaryForItsArchitecture(t *testing.T) {
	idx, _ := builtImage(t)
	imgs := images(t, idx)
	for _, platform := range wantPlatforms(t) {
		machine := machines[platform]
		t.Run(platform, func(t *testing.T) {
			img, ok := imgs[platform]
			if !ok {
				t.Fatalf("no %s image", platform)
			}
			_, manager := files(t, img)
			f, err := elf.NewFile(bytes.NewReader(manager))
			if err != nil {
				t.Fatalf("%s is not an ELF file: %v", entrypoint, err)
			}
			if f.Machine != machine || f.Class != elf.ELFCLASS64 || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
				t.Errorf("machine %s, class %s, OS ABI %s: want %s, 64-bit, Linux", f.Machine, f.Class, f.OSABI, machine)
			}
			if f.Type != elf.ET_EXEC {
				t.Errorf("ELF type %s, want a static executable (%s)", f.Type, elf.ET_EXEC)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("program header %s: the binary is dynamically linked", p.Type)
				}
			}
			if s := f.Section(".dynamic"); s != nil {
				t.Error("the binary has a .dynamic section")
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Errorf("the binary needs %v", libs)
			}
		})
	}
}

// cyclonedx is the part of a CycloneDX SBOM the test reads.
type cyclonedx struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Tools      []cdxComponent `json:"tools"`
		Component  cdxComponent   `json:"component"`
		Properties []struct{ Name, Value string }
	} `json:"metadata"`
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
}

// Each platform's image carries a CycloneDX SBOM of its manager as an OCI 1.1 artifact in the
// layout: an image manifest with artifactType application/vnd.cyclonedx+json, the empty config, the
// SBOM as its one layer, and the platform's image manifest as its subject. The SBOM names the
// manager at the chart's appVersion for that platform, is made by the Makefile's pinned
// cyclonedx-gomod, and lists exactly the modules the binary in the image was built from (its
// embedded build information), at their versions, and the Go standard library of its toolchain.
func TestEachImageCarriesAnSBOMOfItsManager(t *testing.T) {
	idx, _, artifacts := builtLayout(t)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	imgs := images(t, idx)
	makefile, err := os.ReadFile(testutil.Path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`(?m)^CYCLONEDX_GOMOD_VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if pinned == nil {
		t.Fatal("the Makefile pins no CYCLONEDX_GOMOD_VERSION")
	}
	bySubject := map[v1.Hash][]byte{}
	for _, a := range artifacts {
		if a.ArtifactType != "application/vnd.cyclonedx+json" {
			t.Errorf("artifact %s has type %s, want application/vnd.cyclonedx+json", a.Digest, a.ArtifactType)
			continue
		}
		var am v1.Manifest
		if err := json.Unmarshal(layoutBlob(t, a.Digest), &am); err != nil {
			t.Fatal(err)
		}
		if am.MediaType != types.OCIManifestSchema1 || am.ArtifactType != a.ArtifactType || am.Subject == nil {
			t.Fatalf("artifact %s: media type %s, artifactType %q, subject %v", a.Digest, am.MediaType, am.ArtifactType, am.Subject)
		}
		if am.Config.MediaType != "application/vnd.oci.empty.v1+json" || string(layoutBlob(t, am.Config.Digest)) != "{}" {
			t.Errorf("artifact %s: config %+v, want the OCI empty descriptor", a.Digest, am.Config)
		}
		if len(am.Layers) != 1 || am.Layers[0].MediaType != "application/vnd.cyclonedx+json" {
			t.Fatalf("artifact %s: layers %+v, want one CycloneDX JSON layer", a.Digest, am.Layers)
		}
		if _, dup := bySubject[am.Subject.Digest]; dup {
			t.Errorf("two SBOMs refer to %s", am.Subject.Digest)
		}
		bySubject[am.Subject.Digest] = layoutBlob(t, am.Layers[0].Digest)
	}
	for _, d := range m.Manifests {
		platform := d.Platform.String()
		t.Run(platform, func(t *testing.T) {
			data, ok := bySubject[d.Digest]
			if !ok {
				t.Fatalf("no SBOM refers to the %s image %s", platform, d.Digest)
			}
			var bom cyclonedx
			if err := json.Unmarshal(data, &bom); err != nil {
				t.Fatal(err)
			}
			if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.6" {
				t.Errorf("bomFormat %q, specVersion %q: want CycloneDX 1.6", bom.BOMFormat, bom.SpecVersion)
			}
			if !slices.ContainsFunc(bom.Metadata.Tools, func(c cdxComponent) bool { return c.Name == "cyclonedx-gomod" && c.Version == string(pinned[1]) }) {
				t.Errorf("tools %+v: want cyclonedx-gomod %s", bom.Metadata.Tools, pinned[1])
			}
			main := bom.Metadata.Component
			wantPURL := "pkg:golang/github.com/medik8s/node-healthcheck@v" + readChart(t).AppVersion + "?goarch=" + d.Platform.Architecture + "&goos=" + d.Platform.OS + "&type=module#cmd/manager"
			if main.Name != "github.com/medik8s/node-healthcheck" || main.Version != "v"+readChart(t).AppVersion || main.PURL != wantPURL {
				t.Errorf("the SBOM describes %s %s (%s), want the manager at the appVersion: %s", main.Name, main.Version, main.PURL, wantPURL)
			}

			_, manager := files(t, imgs[platform])
			bin := filepath.Join(t.TempDir(), "manager")
			if err := os.WriteFile(bin, manager, 0o600); err != nil {
				t.Fatal(err)
			}
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"std@" + info.GoVersion}
			for _, dep := range info.Deps {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				want = append(want, dep.Path+"@"+dep.Version)
			}
			var got []string
			for _, c := range bom.Components {
				got = append(got, c.Name+"@"+c.Version)
				if !strings.Contains(c.PURL, "goarch="+d.Platform.Architecture) {
					t.Errorf("component %s: purl %s is not for %s", c.Name, c.PURL, platform)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("the SBOM lists %d components, the binary was built from %d modules:\n  SBOM:   %v\n  binary: %v", len(got), len(want), got, want)
			}
		})
	}
}

// The manager for this machine runs, and reports the chart's appVersion: the version stamp the
// Makefile takes from Chart.yaml reached the binary.
func TestManagerReportsTheChartsAppVersion(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	idx, _ := builtImage(t)
	img, ok := images(t, idx)[platform]
	if !ok {
		t.Skipf("the image has no %s manager to run here", platform)
	}
	_, manager := files(t, img)
	bin := t.TempDir() + "/manager"
	if err := os.WriteFile(bin, manager, 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("manager --version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), readChart(t).AppVersion; got != want {
		t.Errorf("manager --version printed %q, want the chart's appVersion %q", got, want)
	}
}

// dockerStage is one stage of a Dockerfile: its FROM line and its instructions.
type dockerStage struct {
	from         string
	instructions [][2]string // keyword (upper case), arguments
}

// parseDockerfile splits a Dockerfile into stages, joining continuation lines and dropping comments.
func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []dockerStage
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		keyword, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		keyword, args, line = strings.ToUpper(keyword), strings.TrimSpace(args), ""
		if keyword == "FROM" {
			stages = append(stages, dockerStage{from: args})
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, [2]string{keyword, args})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// The Dockerfile at the root builds the same image for builders with a daemon: its final stage is an
// empty base with the manager at /manager, the same user, the entrypoint in exec form (there is no
// shell to run a shell form), and the image's fixed labels; its builder stage builds a static,
// version-stamped binary with the Go release go.mod names.
func TestDockerfileDescribesTheImage(t *testing.T) {
	stages := parseDockerfile(t, testutil.Path("Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage Dockerfile (a Go builder, then the image), got %d stages", len(stages))
	}
	final := stages[len(stages)-1]
	if final.from != "scratch" {
		t.Errorf("final stage FROM %q, want scratch: the image has no base", final.from)
	}
	var users, entrypoints, cmds, copies []string
	labels := map[string]string{}
	for _, in := range final.instructions {
		switch in[0] {
		case "USER":
			users = append(users, in[1])
		case "ENTRYPOINT":
			entrypoints = append(entrypoints, in[1])
		case "CMD":
			cmds = append(cmds, in[1])
		case "COPY":
			copies = append(copies, in[1])
		case "LABEL":
			for _, kv := range regexp.MustCompile(`([\w.-]+)="([^"]*)"`).FindAllStringSubmatch(in[1], -1) {
				labels[kv[1]] = kv[2]
			}
		case "RUN", "SHELL":
			t.Errorf("final stage %s %s: the image has no shell to run it", in[0], in[1])
		}
	}
	var ep []string
	if len(entrypoints) != 1 || json.Unmarshal([]byte(entrypoints[0]), &ep) != nil {
		t.Fatalf("final stage ENTRYPOINT %q: want one, in exec (JSON) form", entrypoints)
	}
	if len(users) != 1 || len(cmds) != 0 {
		t.Errorf("final stage USER %q, CMD %q: want one USER and no CMD", users, cmds)
	}
	if len(copies) != 1 || !strings.HasSuffix(copies[0], " "+entrypoint) {
		t.Errorf("final stage COPY %q: want the binary copied to %s", copies, entrypoint)
	}

	idx, _ := builtImage(t)
	for platform, img := range images(t, idx) {
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if len(users) == 1 && users[0] != cfg.Config.User {
			t.Errorf("%s: the Dockerfile's USER is %q, the image's %q", platform, users[0], cfg.Config.User)
		}
		if !slices.Equal(ep, cfg.Config.Entrypoint) {
			t.Errorf("%s: the Dockerfile's ENTRYPOINT is %q, the image's %q", platform, ep, cfg.Config.Entrypoint)
		}
		for k, v := range labels {
			if strings.Contains(v, "${") {
				continue // version and revision: build arguments
			}
			if cfg.Config.Labels[k] != v {
				t.Errorf("%s: the Dockerfile's label %s is %q, the image's %q", platform, k, v, cfg.Config.Labels[k])
			}
		}
	}
	for _, k := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.licenses", "org.opencontainers.image.title"} {
		if _, ok := labels[k]; !ok {
			t.Errorf("the Dockerfile sets no label %s", k)
		}
	}

	builder := strings.Join(func() []string {
		var s []string
		for _, in := range stages[0].instructions {
			s = append(s, in[0]+" "+in[1])
		}
		return s
	}(), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/manager"} {
		if !strings.Contains(builder, want) {
			t.Errorf("the builder stage does not build with %s", want)
		}
	}
	goMod, err := os.ReadFile(testutil.Path("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	dockerfile, err := os.ReadFile(testutil.Path("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if goVersion == nil || !strings.Contains(string(dockerfile), "ARG GO_VERSION="+string(goVersion[1])+"\n") {
		t.Errorf("the Dockerfile's GO_VERSION should be go.mod's Go release %s", goVersion)
	}
}

// The chart deploys this image by default: values.yaml's repository is the Makefile's default
// IMAGE_REPOSITORY, the tag defaults to appVersion, and `make image-push` pushes to exactly the
// image the chart renders.
func TestChartDeploysThisImage(t *testing.T) {
	chrt := readChart(t)
	makefile, err := os.ReadFile(testutil.Path("Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE_REPOSITORY \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no default IMAGE_REPOSITORY")
	}
	repository := string(m[1])

	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	data, err := os.ReadFile(testutil.Path("charts", "node-healthcheck", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != repository || values.Image.Tag != "" {
		t.Errorf("values.yaml image %s:%q, want repository %s (the Makefile's IMAGE_REPOSITORY) and an empty tag (the appVersion)", values.Image.Repository, values.Image.Tag, repository)
	}

	want := repository + ":" + chrt.AppVersion
	if got := renderedImage(t); got != want {
		t.Errorf("the chart's Deployment runs %s, want %s", got, want)
	}

	// What `make image-push` would run, with the defaults (nothing from this test's environment).
	cmd := exec.Command("make", "--no-print-directory", "-n", "image-push")
	cmd.Dir = testutil.RepoRoot()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"IMAGE", "IMAGE_REPOSITORY", "VERSION", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image-push: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)imagebuild push .* ` + regexp.QuoteMeta(want) + `$`).Match(out) {
		t.Errorf("make image-push does not push to %s:\n%s", want, out)
	}
}

// renderedImage renders the chart with its default values, as `helm template` does, and returns
// the Deployment's image.
func renderedImage(t *testing.T) string {
	t.Helper()
	c, err := loader.Load(testutil.Path("charts", "node-healthcheck"))
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.ReleaseName, install.Namespace = true, true, "nhc", "node-healthcheck"
	if install.KubeVersion, err = chartutil.ParseKubeVersion("v1.37.2"); err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, manifest := range releaseutil.SplitManifests(rel.Manifest) {
		u := unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
			return image
		}
	}
	t.Fatal("the chart renders no Deployment with a container")
	return ""
}
