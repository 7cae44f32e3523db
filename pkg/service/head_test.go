package service

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

// TestHeadLikeGet: every GET route answers HEAD with GET's status and
// headers and no body (RFC 9110 section 9.3.2).
func TestHeadLikeGet(t *testing.T) {
	ts, _ := testServer(t, nil)
	for _, tc := range []struct {
		path   string
		token  bool
		status int
	}{
		{"/tools", true, http.StatusOK},
		{"/tools", false, http.StatusUnauthorized},
		{"/healthz", false, http.StatusOK},
		{"/metrics", false, http.StatusOK},
	} {
		var lengths [2]string
		for i, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, ts.URL+tc.path, nil)
			if tc.token {
				req.Header.Set("Authorization", "Bearer tok")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s %s: status %d, want %d", method, tc.path, resp.StatusCode, tc.status)
			}
			if method == http.MethodHead && len(body) != 0 {
				t.Errorf("HEAD %s: %d bytes of body", tc.path, len(body))
			}
			lengths[i] = resp.Header.Get("Content-Length")
			if method == http.MethodGet && lengths[i] != "" && lengths[i] != strconv.Itoa(len(body)) {
				t.Errorf("GET %s: Content-Length %s, body %d bytes", tc.path, lengths[i], len(body))
			}
		}
		if tc.path != "/metrics" && lengths[0] != lengths[1] {
			t.Errorf("%s: Content-Length GET %q, HEAD %q", tc.path, lengths[0], lengths[1])
		}
	}
}
