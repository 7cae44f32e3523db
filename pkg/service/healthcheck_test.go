package service

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHealthCheck runs the container health check against real servers on
// 127.0.0.1: healthy, unhealthy (503), nothing listening, too slow, and the
// address forms a service listens on.
func TestHealthCheck(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	healthy := serve(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	})
	unavailable := serve(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"unavailable","error":"bucket missing"}`, http.StatusServiceUnavailable)
	})
	slow := serve(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// A port nothing listens on: listen, note it, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, healthyPort, _ := net.SplitHostPort(healthy)

	tests := []struct {
		name    string
		addr    string
		timeout time.Duration
		wantErr string // "" for healthy
	}{
		{"healthy", healthy, time.Second, ""},
		{"unspecified IPv4 host is asked on loopback", "0.0.0.0:" + healthyPort, time.Second, ""},
		{"empty host is asked on loopback", ":" + healthyPort, time.Second, ""},
		{"unspecified IPv6 host is asked on loopback", "[::]:" + healthyPort, time.Second, ""},
		{"503 is unhealthy, with the reason", unavailable, time.Second, "503 Service Unavailable: {\"status\":\"unavailable\",\"error\":\"bucket missing\"}"},
		{"nothing listening", closed, time.Second, "connection refused"},
		{"no answer in time", slow, 200 * time.Millisecond, "no answer within 200ms"},
		{"empty address", "", time.Second, "ADDR is empty"},
		{"address without port", "127.0.0.1", time.Second, `listen address "127.0.0.1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			err := HealthCheck(context.Background(), tc.addr, tc.timeout)
			if took := time.Since(start); took > tc.timeout+time.Second {
				t.Errorf("took %s, timeout %s", took, tc.timeout)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("HealthCheck(%q) = %v, want healthy", tc.addr, err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("HealthCheck(%q) = nil, want error containing %q", tc.addr, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("HealthCheck(%q) = %q, want it to contain %q", tc.addr, err, tc.wantErr)
			}
		})
	}
}

// TestRunHealthCheckExitStatus checks the exit status and the one line the
// health-check mode prints (Docker keeps it in the container's health log).
func TestRunHealthCheckExitStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	for _, tc := range []struct {
		addr     string
		wantCode int
		wantOut  string
	}{
		{srv.Listener.Addr().String(), 0, "healthy\n"},
		{"", 1, "health check: no listen address (ADDR is empty)\n"},
	} {
		var out bytes.Buffer
		if code := runHealthCheck(context.Background(), tc.addr, &out); code != tc.wantCode || out.String() != tc.wantOut {
			t.Errorf("runHealthCheck(%q) = %d, %q; want %d, %q", tc.addr, code, out.String(), tc.wantCode, tc.wantOut)
		}
	}
}
