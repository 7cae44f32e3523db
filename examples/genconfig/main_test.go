package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRunRefusesServicesWithoutTools: a service whose GET /tools publishes
// no binding is refused, naming it, instead of a config without tools.
func TestRunRefusesServicesWithoutTools(t *testing.T) {
	for _, body := range []string{`null`, `{}`, `{"tools":null}`, `{"tools":[]}`} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		err := run(io.Discard, "local", "BRAIN_API_KEY", []string{ts.URL}, "tok")
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "publishes no tools") || !strings.Contains(err.Error(), ts.URL) {
			t.Errorf("%s: err %v, want one naming the service and saying it publishes no tools", body, err)
		}
	}
}
