package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestTailWriterKeepsTheLastWholeLines(t *testing.T) {
	var all bytes.Buffer
	w := newTailWriter(&all, 64)
	for i := range 20 {
		fmt.Fprintf(w, "line %02d\n", i)
	}
	if all.Len() != 20*len("line 00\n") {
		t.Fatalf("passed on %d bytes, want all of them", all.Len())
	}
	got := w.String()
	// 64 bytes hold the last 8 lines of 8 bytes exactly; a cut line would be dropped whole.
	want := "line 12\nline 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\n"
	if got != want {
		t.Fatalf("tail %q, want %q", got, want)
	}
	fmt.Fprint(w, "partial")
	if got := w.String(); got != "line 13\nline 14\nline 15\nline 16\nline 17\nline 18\nline 19\npartial" {
		t.Fatalf("after a cut, tail %q", got)
	}
	if got := newTailWriter(nil, 10).String(); got != "" {
		t.Fatalf("an empty tail is %q", got)
	}
}

// TestWaitReadyNamesATakenPort: a manager that exits because its port was taken is told apart (and
// started again by StartReady on other ports); any other exit quotes what the manager printed.
func TestWaitReadyNamesATakenPort(t *testing.T) {
	for _, tc := range []struct {
		printed string
		taken   bool
	}{
		{`{"level":"error","msg":"problem running manager","error":"listen tcp :35123: bind: address already in use"}` + "\n", true},
		{`{"level":"error","msg":"problem running manager","error":"tls: private key does not match public key"}` + "\n", false},
	} {
		m := &Manager{ProbeAddr: "127.0.0.1:1", done: make(chan error, 1), output: newTailWriter(nil, outputTail)}
		fmt.Fprint(m.output, tc.printed)
		m.done <- errors.New("exit status 1")
		err := m.WaitReady(context.Background())
		if err == nil || errors.Is(err, ErrPortTaken) != tc.taken || !strings.Contains(err.Error(), tc.printed) {
			t.Errorf("after %q: %v (port taken: %t)", tc.printed, err, errors.Is(err, ErrPortTaken))
		}
	}
}
