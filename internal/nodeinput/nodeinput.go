// Package nodeinput bounds what the operator reads from values a node can write itself.
//
// Under NodeRestriction a kubelet may write any annotation, and some labels and conditions, on its own
// Node; remediators' agents often may patch every Node. Such a value is an adversary's input: the
// operator parses it once, bounded in size (Time, Bounded) and in time (checked against now and the
// manager's skew bound by its reader), keeps in memory only a short hash of it (Hash) and quotes
// only a short prefix of it in events and status (Quote). The node cache keeps only the annotations
// decisions read (Kept), each cut to MaxValueLen (Bounded). docs/architecture.md has the table of
// every such input, who can write it, and what the operator does with it.
//
// The package is pure: no client, no clock.
package nodeinput

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxValueLen is the longest node annotation value the node cache keeps as it is: every value the
// operator reads is far shorter (a time: 35 bytes at most; a Machine's "<namespace>/<name>": at
// most 317). A longer value is replaced by Bounded's stand-in, so a node cannot make the cache hold
// its 256 KiB of annotations.
const MaxValueLen = 512

// maxTimeLen is the longest value Time parses: an RFC 3339 time with nanoseconds and an offset is 35
// bytes.
const maxTimeLen = 64

// QuoteLen is how many bytes of a node-written value events and status quote: enough to recognise
// a time or a typo, never the 1 KiB an event note may hold.
const QuoteLen = 40

// Time parses an RFC 3339 time a node wrote. A value longer than any such time is not parsed.
func Time(v string) (time.Time, error) {
	if len(v) > maxTimeLen {
		return time.Time{}, errors.New("too long for an RFC 3339 time")
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errors.New("not an RFC 3339 time")
	}
	return at, nil
}

// Hash is a short hash of a value: what in-memory records keep of a node-written value, to tell
// whether it changed without keeping it.
func Hash(v string) string {
	h := fnv.New64a()
	h.Write([]byte(v))
	return fmt.Sprintf("%016x", h.Sum64())
}

// Quote returns a printable, quoted prefix of a node-written value, at most QuoteLen bytes of it
// (cut at a rune boundary), followed by its length when it was cut: `"2026-13-01T…" (1048576 bytes)`.
func Quote(v string) string {
	if n, ok := WasBounded(v); ok {
		// The cache's stand-in: its prefix, and the length of the value the node wrote.
		parts := strings.SplitN(v, "/", 4)
		return fmt.Sprintf("%q… (%d bytes)", parts[len(parts)-1], n)
	}
	if len(v) <= QuoteLen {
		return fmt.Sprintf("%q", v)
	}
	cut := QuoteLen
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:cut], len(v))
}

// boundedMark starts Bounded's stand-in of a value longer than MaxValueLen.
const boundedMark = "nodeinput.bounded/"

// Bounded returns the value as the node cache keeps it: as it is up to MaxValueLen bytes, otherwise a
// stand-in that is no valid time, Machine reference or name ("nodeinput.bounded/<len>/<hash>/<prefix>"),
// so that a decision refuses it, the cache's change detection still sees it change, and an event can
// quote its beginning.
func Bounded(v string) string {
	if len(v) <= MaxValueLen {
		return v
	}
	prefix := v[:QuoteLen]
	for len(prefix) > 0 && !utf8.ValidString(prefix) {
		prefix = prefix[:len(prefix)-1]
	}
	return fmt.Sprintf("%s%d/%s/%s", boundedMark, len(v), Hash(v), prefix)
}

// WasBounded reports whether a value is Bounded's stand-in, and then the original's length.
func WasBounded(v string) (int, bool) {
	rest, ok := strings.CutPrefix(v, boundedMark)
	if !ok {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d/", &n); err != nil {
		return 0, false
	}
	return n, true
}
