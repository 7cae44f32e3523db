package server

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: brain runs the collector at GCPercent unless GOGC is set,
// and restore puts the previous target back.
func TestTuneGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		gogc *string // nil: unset
		want int     // the target while tuned, from a previous one of 150
	}{
		{"GOGC unset", nil, GCPercent},
		{"GOGC set", ptr("300"), 150},
		{"GOGC set empty", ptr(""), GCPercent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc == nil {
				old, had := os.LookupEnv("GOGC")
				os.Unsetenv("GOGC")
				t.Cleanup(func() {
					if had {
						os.Setenv("GOGC", old)
					}
				})
			} else {
				t.Setenv("GOGC", *tc.gogc)
			}
			prev := debug.SetGCPercent(150)
			defer debug.SetGCPercent(prev)
			restore := TuneGC()
			if got := debug.SetGCPercent(-1); got != tc.want {
				t.Errorf("target while tuned: %d, want %d", got, tc.want)
			}
			debug.SetGCPercent(tc.want)
			restore()
			if got := debug.SetGCPercent(150); got != 150 {
				t.Errorf("target after restore: %d, want 150", got)
			}
		})
	}
}
