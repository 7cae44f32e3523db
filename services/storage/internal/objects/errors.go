package objects

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/brain-tools/suite/services/storage/internal/keys"
)

// Kind classifies a storage failure for the caller.
type Kind string

// The kinds of storage failure.
const (
	KindInvalid     Kind = "invalid"     // the request was refused before reaching S3
	KindNotFound    Kind = "not_found"   // no such object
	KindRange       Kind = "range"       // the requested range is outside the object
	KindDenied      Kind = "denied"      // the service's own credentials were refused
	KindNoBucket    Kind = "no_bucket"   // the configured bucket does not exist
	KindConflict    Kind = "conflict"    // the key clashes with another object (file vs folder on posix backends)
	KindTooLarge    Kind = "too_large"   // the server refused the object's size
	KindUnavailable Kind = "unavailable" // network failure, timeout, 5xx, throttling
	KindOther       Kind = "other"       // anything else the server said
)

// Error is a storage failure. Key is relative to the caller's namespace
// and Msg never contains the namespace prefix, so both are safe to show.
type Error struct {
	Op   string // put, get, head, list, delete, presign
	Key  string
	Kind Kind
	// Code is the S3 error code, when the server sent one.
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Op + ": " + e.Msg
	}
	return fmt.Sprintf("%s %q: %s", e.Op, e.Key, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// classify turns an SDK error into an *Error with the namespace prefix
// redacted from everything the server said.
func classify(op, key string, ns keys.Namespace, err error) error {
	e := &Error{Op: op, Key: key, Err: err}
	var api smithy.APIError
	var resp *awshttp.ResponseError
	status := 0
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.Kind, e.Msg = KindUnavailable, "storage timed out"
	case errors.Is(err, context.Canceled):
		e.Kind, e.Msg = KindUnavailable, "cancelled"
	case errors.As(err, &api):
		e.Code = api.ErrorCode()
		e.Kind, e.Msg = kindOf(e.Code, status)
		if e.Kind == KindOther || e.Kind == KindConflict || (e.Kind == KindInvalid && e.Code != "KeyTooLongError") {
			// Say what the server said, minus the prefix.
			if m := ns.Redact(api.ErrorMessage()); m != "" {
				e.Msg = fmt.Sprintf("%s: %s", e.Code, m)
			} else {
				e.Msg = e.Code
			}
		}
	case status != 0:
		e.Kind, e.Msg = kindOf("", status)
	default:
		var ne net.Error
		var maxAttempts *retry.MaxAttemptsError
		if errors.As(err, &ne) || errors.As(err, &maxAttempts) {
			e.Kind, e.Msg = KindUnavailable, "storage unreachable"
		} else {
			e.Kind, e.Msg = KindOther, ns.Redact(err.Error())
		}
	}
	return e
}

func kindOf(code string, status int) (Kind, string) {
	switch code {
	case "NoSuchKey", "NotFound":
		return KindNotFound, "no such object"
	case "InvalidRange":
		return KindRange, "range not satisfiable"
	case "NoSuchBucket":
		return KindNoBucket, "the storage bucket does not exist (check STORAGE_BUCKET)"
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "AllAccessDisabled":
		return KindDenied, "storage refused the service's credentials (" + code + ")"
	case "EntityTooLarge":
		return KindTooLarge, "object too large for the storage server"
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
		return KindUnavailable, "storage busy or failing (" + code + "); try again later"
	case "KeyTooLongError":
		return KindInvalid, "the storage server refused the key as too long (file-system backends limit each /-separated segment to 255 bytes)"
	case "ExistingObjectIsDirectory", "ObjectParentIsFile", "DirectoryObjectContainsData":
		return KindConflict, code
	case "InvalidArgument", "InvalidRequest", "InvalidObjectName":
		return KindInvalid, code
	}
	switch {
	case status == http.StatusNotFound:
		return KindNotFound, "no such object"
	case status == http.StatusRequestedRangeNotSatisfiable:
		return KindRange, "range not satisfiable"
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		return KindDenied, fmt.Sprintf("storage refused the service's credentials (HTTP %d)", status)
	case status >= 500 || status == http.StatusTooManyRequests:
		return KindUnavailable, fmt.Sprintf("storage busy or failing (HTTP %d); try again later", status)
	}
	return KindOther, fmt.Sprintf("storage error %s (HTTP %d)", code, status)
}
