package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// cutBody gives a few bytes of its body, then fails as a connection
// broken in the middle of it does.
type cutBody struct{ sent bool }

func (b *cutBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, `{"tool":"e`), nil
	}
	return 0, io.ErrUnexpectedEOF
}

// TestReadBodyCut: a body that breaks off is a bad request, the client
// there or gone, unless its server ended the request with an Error as
// its context's cause (brain's shutdown): then it is that Error, not a 400
// for a body the client was still sending.
func TestReadBodyCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(context.CancelCauseFunc)
		status int
		code   string
	}{
		{"request alive", func(context.CancelCauseFunc) {}, http.StatusBadRequest, CodeInvalidRequest},
		{"client left", func(cancel context.CancelCauseFunc) { cancel(nil) }, http.StatusBadRequest, CodeInvalidRequest},
		{"server ended it", func(cancel context.CancelCauseFunc) { cancel(Unavailable("shutting down")) }, http.StatusServiceUnavailable, CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			r := httptest.NewRequestWithContext(ctx, "POST", "/", io.NopCloser(&cutBody{}))
			r.ContentLength = 48
			tc.end(cancel)
			_, err := ReadBody(r, 1<<20)
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code {
				t.Errorf("ReadBody: %v, want %d %s", err, tc.status, tc.code)
			}
		})
	}
}
