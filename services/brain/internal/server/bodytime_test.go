package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// TestStalledBodyRefusedAtOnce: a client that declares a body, sends part
// of it and waits, with a wrong or no API key or to no route, gets its
// answer at once and the connection closed; brain does not wait for the
// rest of the body.
func TestStalledBodyRefusedAtOnce(t *testing.T) {
	b := startBrain(t)
	addr := strings.TrimPrefix(b.url, "http://")
	for _, tc := range []struct{ path, auth, want string }{
		{"/sessions", "Authorization: Bearer not-a-key\r\n", "401"},
		{"/sessions", "", "401"},
		{"/no/such/route", "", "404"},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: 5000\r\n\r\n{\"con", tc.path, tc.auth)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		rd := bufio.NewReader(conn)
		status, _ := rd.ReadString('\n')
		answered := time.Since(start)
		_, err = io.Copy(io.Discard, rd) // the rest, until brain closes
		closed := err == nil && time.Since(start) < httpapi.DrainGrace+2*time.Second
		conn.Close()
		if !strings.Contains(status, tc.want) || answered > httpapi.DrainGrace+2*time.Second || !closed {
			t.Errorf("%s %q: %q after %s (closed %v), want %s at once and the connection closed", tc.path, tc.auth, strings.TrimSpace(status), answered, closed, tc.want)
		}
	}
}
