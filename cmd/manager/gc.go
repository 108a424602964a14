package main

import (
	goruntime "runtime"
	"runtime/debug"
)

// defaultGCPercent is the manager's GOGC when the environment sets none: the heap may grow by 40% of
// its live size between collections instead of doubling. The manager's live heap is small (about
// 30 MiB at 5,000 nodes during a mass failure) and its work waits on the API server, so the extra
// collections cost little CPU, while Go's default doubled the peak heap (docs/performance.md, at the
// 5,000-node outage's peak: 109 MiB RSS with GOGC=100, about 90 with 50 at the time; later 78-79.5
// with 50 and 75-76 with 40, with no measurable CPU difference).
// GOGC=<n> (or off) in the environment, and GOMEMLIMIT, work as in any Go program.
const defaultGCPercent = 40

// applyGCDefault sets defaultGCPercent unless GOGC is set, and returns the GOGC in effect (-1: off,
// or whatever the environment chose when it set one).
func applyGCDefault(lookupEnv func(string) (string, bool)) int {
	if _, set := lookupEnv("GOGC"); set {
		current := debug.SetGCPercent(100)
		debug.SetGCPercent(current)
		return current
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

// applyProfilingDefault turns off the runtime's heap profile sampling unless the pprof endpoints
// are served (pprofAddr, "0" or "": not): nothing else reads the samples, which cost the process
// a stack record per sampled allocation site (at 5,000 nodes about 1.7 MiB of `BuckHashSys` at
// the mass failure's peak, docs/performance.md). GODEBUG=memprofilerate=<n> still sets a rate
// where the endpoints are served. It returns the rate in effect.
func applyProfilingDefault(pprofAddr string) int {
	if pprofAddr == "0" || pprofAddr == "" {
		goruntime.MemProfileRate = 0
	}
	return goruntime.MemProfileRate
}
