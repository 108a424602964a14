package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// ImageLayoutEnv names the OCI image layout that the tests read the manager from; `make test` sets
// it to the image for this machine's platform (`make image-host`, bin/image-linux-<arch>), the
// Makefile's other targets to the multi-arch one (`make image`, bin/image).
const ImageLayoutEnv = "IMAGE_LAYOUT"

// ImageLayout returns the folder of the OCI image layout that `make image` (or `make image-host`)
// built: the image the chart deploys. Without ImageLayoutEnv it takes bin/image-linux-<arch>, else
// bin/image. It refuses a missing layout, and one older than any file the image is built from (the
// Makefile's IMAGE_INPUTS), so no test runs a stale binary by mistake.
func ImageLayout() (string, error) {
	dir := os.Getenv(ImageLayoutEnv)
	if dir == "" {
		dir = HostImageLayout()
		if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
			dir = Path("bin", "image")
		}
	}
	index, err := os.Stat(filepath.Join(dir, "index.json"))
	if err != nil {
		return "", fmt.Errorf("no image at %s: run the tests with 'make test', or 'make image-host' first (%w)", dir, err)
	}
	newest, newestTime, err := newestImageInput()
	if err != nil {
		return "", err
	}
	if newestTime.After(index.ModTime()) {
		return "", fmt.Errorf("the image at %s is older than %s: run 'make image-host' or 'make image' (or the tests with 'make test')", dir, newest)
	}
	return dir, nil
}

// HostImageLayout is where `make image-host` builds the image for this machine's platform alone.
func HostImageLayout() string {
	return Path("bin", "image-linux-"+runtime.GOARCH)
}

// newestImageInput returns the most recently modified of the image's inputs, as the Makefile's
// IMAGE_INPUTS lists them: every non-test Go file under api/, cmd/ and internal/ (less
// internal/testutil), go.mod, go.sum and the chart's Chart.yaml (its appVersion is the version).
func newestImageInput() (string, time.Time, error) {
	var newest string
	var newestTime time.Time
	consider := func(path string, info fs.FileInfo) {
		if info.ModTime().After(newestTime) {
			newest, newestTime = path, info.ModTime()
		}
	}
	for _, top := range []string{"api", "cmd", "internal"} {
		err := filepath.WalkDir(Path(top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path == Path("internal", "testutil") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			consider(path, info)
			return nil
		})
		if err != nil {
			return "", time.Time{}, err
		}
	}
	for _, f := range []string{Path("go.mod"), Path("go.sum"), Path("charts", "node-healthcheck", "Chart.yaml")} {
		info, err := os.Stat(f)
		if err != nil {
			return "", time.Time{}, err
		}
		consider(f, info)
	}
	return newest, newestTime, nil
}
