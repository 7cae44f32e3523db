package operator

import (
	"net/http"
	"testing"

	"github.com/brain-tools/suite/pkg/jobs"
)

// TestHeadLikeGet: the pages answer HEAD with GET's status and headers and
// no body (RFC 9110 section 9.3.2); the live stream does not.
func TestHeadLikeGet(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	for _, path := range []string{"/approvals", "/approval/" + jobs.NewID(), "/approvals/rows", "/operator/signin", "/operator/static/page.css", "/operator/static/nope"} {
		g, h := c.get(path), c.head(path)
		if g.status != h.status || h.body != "" || g.header.Get("Content-Type") != h.header.Get("Content-Type") || g.header.Get("Location") != h.header.Get("Location") {
			t.Errorf("%s: GET %d %q, HEAD %d %q with %d bytes of body", path, g.status, g.header.Get("Content-Type"), h.status, h.header.Get("Content-Type"), len(h.body))
		}
	}
	if h := c.head("/approvals/live"); h.status != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /approvals/live: %d, want 405", h.status)
	}
}
