package service

import (
	"net/http"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// BodyTimeout is how long a client has to send a request's body once its
// headers are in (httpapi.BodyTimeout, 60 s).
//
// Deprecated: use httpapi.BodyTimeout.
const BodyTimeout = httpapi.BodyTimeout

// DrainGrace is how long a refused request's unread body may take to
// arrive (httpapi.DrainGrace, 1 s).
//
// Deprecated: use httpapi.DrainGrace.
const DrainGrace = httpapi.DrainGrace

// LimitBodyTime gives a request with a body d to send it; see
// httpapi.LimitBodyTime, which this calls.
//
// Deprecated: use httpapi.LimitBodyTime.
func LimitBodyTime(d time.Duration, next http.Handler) http.Handler {
	return httpapi.LimitBodyTime(d, next)
}

// IsTimeout reports whether err is a read that ran past a deadline.
//
// Deprecated: use httpapi.IsTimeout.
func IsTimeout(err error) bool { return httpapi.IsTimeout(err) }
