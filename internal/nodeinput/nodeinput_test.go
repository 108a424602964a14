package nodeinput

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTime(t *testing.T) {
	for _, tc := range []struct {
		v, err string
	}{
		{"2026-11-29T03:00:00Z", ""},
		{"2026-11-29T03:00:00.123456789+01:00", ""},
		{"now", "not an RFC 3339 time"},
		{strings.Repeat("2", 65), "too long"},
	} {
		_, err := Time(tc.v)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Time(%.20q): %v, want %q", tc.v, err, tc.err)
		}
	}
}

// FuzzQuoteAndBounded: whatever a node writes, an event quotes at most a short, valid prefix of it,
// and the cache keeps at most MaxValueLen bytes that change with the value and parse as no time.
func FuzzQuoteAndBounded(f *testing.F) {
	f.Add("2026-11-29T03:00:00Z")
	f.Add(strings.Repeat("é", 400))
	f.Add(strings.Repeat("x", 10000))
	f.Fuzz(func(t *testing.T, v string) {
		q := Quote(v)
		if len(q) > 3*QuoteLen+64 {
			t.Fatalf("quote of %d bytes: %s", len(q), q)
		}
		b := Bounded(v)
		if len(b) > MaxValueLen {
			t.Fatalf("bounded to %d bytes", len(b))
		}
		if len(v) <= MaxValueLen {
			if b != v {
				t.Fatal("a short value changed")
			}
			return
		}
		if n, ok := WasBounded(b); !ok || n != len(v) {
			t.Fatalf("stand-in %q does not say it was bounded from %d bytes", b, len(v))
		}
		if _, err := Time(b); err == nil {
			t.Fatalf("stand-in %q parses as a time", b)
		}
		if utf8.ValidString(v) && !utf8.ValidString(b) {
			t.Fatalf("stand-in of valid text is not: %q", b)
		}
		if Bounded(v+"x") == b {
			t.Fatal("a changed value looks the same")
		}
		if qb := Quote(b); len(qb) > 3*QuoteLen+64 || !strings.Contains(qb, "bytes") {
			t.Fatalf("quote of the stand-in: %s", qb)
		}
	})
}
