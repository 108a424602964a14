package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteFolderSwitchesAllKeysAtOnce reads the two halves of a key pair while the folder is
// rewritten: a reader must never see one version's certificate beside another version's key (a
// webhook server starting then exits: "private key does not match public key").
func TestWriteFolderSwitchesAllKeysAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	version := func(i int) map[string][]byte {
		return map[string][]byte{"tls.crt": fmt.Appendf(nil, "crt %d", i), "tls.key": fmt.Appendf(nil, "key %d", i)}
	}
	if err := writeFolder(dir, version(0)); err != nil {
		t.Fatal(err)
	}
	const versions = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= versions; i++ {
			if err := writeFolder(dir, version(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads, mixed := 0, 0
	for {
		// Both files through one resolution of ..data: a switch between the two reads is what the
		// kubelet cannot prevent either (the reader reads again), but no version may ever hold one
		// key of another.
		target, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		crt, errCrt := os.ReadFile(filepath.Join(dir, "tls.crt"))
		key, errKey := os.ReadFile(filepath.Join(dir, "tls.key"))
		after, _ := os.Readlink(filepath.Join(dir, "..data"))
		if after != target {
			continue // switched while reading (and the previous version may be gone): read again
		}
		if errCrt != nil || errKey != nil {
			t.Fatalf("a key is missing: %v, %v", errCrt, errKey)
		}
		reads++
		if !bytes.Equal(bytes.TrimPrefix(crt, []byte("crt ")), bytes.TrimPrefix(key, []byte("key "))) {
			mixed++
			t.Errorf("read %q beside %q", crt, key)
		}
		if bytes.Equal(crt, []byte(fmt.Sprintf("crt %d", versions))) {
			break
		}
	}
	wg.Wait()
	t.Logf("%d consistent reads during %d switches, %d mixed", reads, versions, mixed)

	// A key that leaves the Secret leaves the folder; only the current version is kept.
	if err := writeFolder(dir, map[string][]byte{"tls.crt": []byte("only")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.key")); !os.IsNotExist(err) {
		t.Fatalf("tls.key stayed: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 3 { // ..<version>, ..data, tls.crt
		t.Fatalf("folder holds %v, want one version, ..data and tls.crt", names)
	}
	if err := writeFolder(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); !os.IsNotExist(err) {
		t.Fatalf("an empty Secret left tls.crt: %v", err)
	}
}
