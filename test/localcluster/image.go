package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/medik8s/node-healthcheck/internal/plumbing/imagebuild"
	"github.com/medik8s/node-healthcheck/internal/testutil"
)

// ManagerBinary returns the manager under test: $MANAGER_BINARY when set, else the image's
// (ManagerFromImage, extracted into dir).
func ManagerBinary(dir string) (string, error) {
	if b := os.Getenv("MANAGER_BINARY"); b != "" {
		return b, nil
	}
	return ManagerFromImage(dir)
}

// ManagerFromImage extracts the manager binary for this machine's platform from the image that
// `make image` built (testutil.ImageLayout), the one the chart's Deployment runs, into dir and
// returns its path: the suites run exactly what is shipped rather than a build of their own.
func ManagerFromImage(dir string) (string, error) {
	layoutDir, err := testutil.ImageLayout()
	if err != nil {
		return "", err
	}
	idx, _, err := imagebuild.ReadLayout(layoutDir)
	if err != nil {
		return "", err
	}
	img, err := imagebuild.PlatformImage(idx, v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH})
	if err != nil {
		return "", fmt.Errorf("%s: %w: this machine cannot run the image's manager", layoutDir, err)
	}
	bin := filepath.Join(dir, "manager")
	if err := imagebuild.ExtractFile(img, imagebuild.Entrypoint, bin); err != nil {
		return "", fmt.Errorf("extracting the manager from %s: %w", layoutDir, err)
	}
	return bin, nil
}
