package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"explain"}, {"explain", "pod", "x"}, {"describe", "node", "x"}, {"explain", "node", "a", "b"}} {
		var stderr bytes.Buffer
		err := run(context.Background(), args, &bytes.Buffer{}, &stderr)
		if err == nil || !strings.Contains(stderr.String(), "kubectl nhc explain node <name>") {
			t.Errorf("%q: err %v, stderr %q; want the usage and an error", args, err, stderr.String())
		}
	}
	// Flags before and after the words; a kubeconfig that does not exist fails at loading, after the
	// words were accepted.
	err := run(context.Background(), []string{"--lease-namespace=x", "explain", "node", "--kubeconfig=/does/not/exist", "worker-1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("got %v, want a kubeconfig error", err)
	}
}
