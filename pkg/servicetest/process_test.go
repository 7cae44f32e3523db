package servicetest

import (
	"regexp"
	"testing"
	"time"
)

// TestProcess builds a program, starts it with an environment of its own,
// waits for its line and its health, and stops it with SIGTERM.
func TestProcess(t *testing.T) {
	bin := BuildT(t, "testdata/hello")
	t.Setenv("HOSTNAME", "from-the-test")
	p := StartProcess(t, "hello", bin, map[string]string{"ADDR": "127.0.0.1:0", "GREETING": "hi"})
	m := p.Await(t, regexp.MustCompile(`hello listening on (\S+), GREETING="(\w*)", HOSTNAME="(.*)"`), 20*time.Second)
	if m[2] != "hi" || m[3] != "" {
		t.Fatalf("environment: GREETING %q, HOSTNAME %q: want only what StartProcess was given", m[2], m[3])
	}
	p.AwaitHealthy(t, "http://"+m[1]+"/healthz", 20*time.Second)
	p.Stop()
	if code := p.Cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("exit code %d, want 3 (SIGTERM handled)", code)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
}

// TestOutputMax: an Output with Max keeps the first Max bytes and takes
// every write whole; the zero value keeps everything.
func TestOutputMax(t *testing.T) {
	capped, all := &Output{Max: 5}, &Output{}
	for _, w := range []string{"abc", "defg", "hi"} {
		for _, o := range []*Output{capped, all} {
			if n, err := o.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
	}
	if capped.String() != "abcde" || all.String() != "abcdefghi" {
		t.Fatalf("capped %q, all %q", capped.String(), all.String())
	}
}
