package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// HealthCheckFlag is the argument that turns a service binary into its own
// container health check (Docker HEALTHCHECK, Kubernetes exec probe): the
// images have no shell, curl or wget. Main parses it with the flag
// package, so --healthcheck works too. See Main and HealthCheck.
const HealthCheckFlag = "-healthcheck"

// HealthCheckTimeout bounds one health check, connection to answer.
const HealthCheckTimeout = 3 * time.Second

// HealthCheck asks GET http://<addr>/healthz and returns nil when the answer
// is 200. addr is the service's listen address (ADDR, BRAIN_ADDR): an
// unspecified host (":8081", "0.0.0.0:8081", "[::]:8081") is asked on
// 127.0.0.1, any other host as given. Errors: an empty or malformed addr,
// nothing listening, no answer within timeout, any status but 200 (with the
// first 200 bytes of the body, e.g. a 503's reason).
func HealthCheck(ctx context.Context, addr string, timeout time.Duration) error {
	if addr == "" {
		return errors.New("health check: no listen address (ADDR is empty)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("health check: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	// A client of its own: no proxy from the environment, no keep-alive.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("health check: GET %s: no answer within %s", url, timeout)
		}
		return fmt.Errorf("health check: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}

// runHealthCheck is Main's health-check mode: check addr and return the
// exit status, 0 healthy or 1, after one line on w.
func runHealthCheck(ctx context.Context, addr string, w io.Writer) int {
	if err := HealthCheck(ctx, addr, HealthCheckTimeout); err != nil {
		fmt.Fprintln(w, err)
		return 1
	}
	fmt.Fprintln(w, "healthy")
	return 0
}
