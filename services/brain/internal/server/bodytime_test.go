package server

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestStalledBodyRefusedAtOnce: a client that declares a body, sends part
// of it and waits, with a wrong or no API key, gets its 401 at once and
// the connection closed; brain does not wait for the rest of the body.
func TestStalledBodyRefusedAtOnce(t *testing.T) {
	b := startBrain(t)
	addr := strings.TrimPrefix(b.url, "http://")
	for _, auth := range []string{"Authorization: Bearer not-a-key\r\n", ""} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(conn, "POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: 5000\r\n\r\n{\"con", auth)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		rd := bufio.NewReader(conn)
		status, _ := rd.ReadString('\n')
		var closeHeader bool
		for {
			line, err := rd.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
			closeHeader = closeHeader || strings.EqualFold(strings.TrimSpace(line), "Connection: close")
		}
		conn.Close()
		if !strings.Contains(status, "401") || time.Since(start) > 2*time.Second || !closeHeader {
			t.Errorf("auth %q: %q after %s (Connection: close %v), want 401 at once and the connection closed", auth, strings.TrimSpace(status), time.Since(start), closeHeader)
		}
	}
}
