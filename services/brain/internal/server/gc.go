package server

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) brain runs at when
// the environment sets none. brain's live heap is small (a few MB: the
// cached sessions and tool sets, the calls in flight) while each call
// allocates about 30 KB, so at Go's default of 100 the collector runs
// every ~150 calls at concurrency 32 and its fixed cost per cycle is a
// large share of a call's CPU. At 200 it runs half as often: `make bench`
// measured about 5 µs less CPU per call at c32, for a heap that may grow to
// three times the live one (at least 8 MB) instead of twice (4 MB).
const GCPercent = 200

// TuneGC sets the collector's target to GCPercent unless GOGC is set to
// something (the runtime then took that one; an empty GOGC is Go's
// default), and returns the function that restores the previous target.
func TuneGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(GCPercent)
	return func() { debug.SetGCPercent(prev) }
}
