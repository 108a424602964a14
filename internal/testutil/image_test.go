package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A layout older than a source of the image is refused, naming the source; a missing one too; a
// current one is returned.
func TestImageLayoutRefusesAMissingOrStaleImage(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ImageLayoutEnv, dir)
	if _, err := ImageLayout(); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("a folder without index.json: %v, want an error that says to run make image", err)
	}

	index := filepath.Join(dir, "index.json")
	if err := os.WriteFile(index, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(index, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := ImageLayout(); err == nil || !strings.Contains(err.Error(), "is older than "+RepoRoot()) {
		t.Errorf("a layout from 1970: %v, want an error naming the newer source", err)
	}

	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(index, future, future); err != nil {
		t.Fatal(err)
	}
	if got, err := ImageLayout(); err != nil || got != dir {
		t.Errorf("a current layout: %q, %v", got, err)
	}
}
