package server

import (
	"net/http"
	"strconv"
	"testing"
)

// TestHeadLikeGet: each GET route but the event stream answers HEAD with
// GET's status and Content-Length and no body (RFC 9110 section 9.3.2);
// HEAD on the event stream is 405 naming GET.
func TestHeadLikeGet(t *testing.T) {
	b := startBrain(t)
	sess := b.session("t1", "echo")
	_, c := b.call("t1", sess.ID, "echo", map[string]any{"text": "hi"}, 5)
	for _, tc := range []struct {
		path, tenant string
		status       int
	}{
		{"/healthz", "", http.StatusOK},
		{"/metrics", "", http.StatusOK},
		{"/catalog", "t1", http.StatusOK},
		{"/sessions/" + sess.ID, "t1", http.StatusOK},
		{"/sessions/" + sess.ID, "t2", http.StatusNotFound},
		{"/tool_calls?session_id=" + sess.ID, "t1", http.StatusOK},
		{"/tool_calls/" + c.ID, "t1", http.StatusOK},
		{"/tool_calls/" + c.ID, "", http.StatusUnauthorized},
		{"/tool_calls?limit=0", "t1", http.StatusBadRequest},
	} {
		get := b.do(http.MethodGet, tc.path, tc.tenant, nil)
		head := b.do(http.MethodHead, tc.path, tc.tenant, nil)
		if get.status != tc.status || head.status != tc.status {
			t.Errorf("%s: GET %d, HEAD %d, want %d", tc.path, get.status, head.status, tc.status)
		}
		if len(head.body) != 0 {
			t.Errorf("HEAD %s: %d bytes of body", tc.path, len(head.body))
		}
		if tc.path != "/metrics" {
			if cl := get.header.Get("Content-Length"); cl != strconv.Itoa(len(get.body)) || head.header.Get("Content-Length") != cl {
				t.Errorf("%s: Content-Length GET %q (body %d), HEAD %q", tc.path, cl, len(get.body), head.header.Get("Content-Length"))
			}
		}
	}
	r := b.do(http.MethodHead, "/sessions/"+sess.ID+"/events", "t1", nil)
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, OPTIONS" && r.header.Get("Allow") != "GET" {
		t.Errorf("HEAD events: %d, Allow %q", r.status, r.header.Get("Allow"))
	}
}
