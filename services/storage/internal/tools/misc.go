package tools

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/keys"
	"github.com/brain-tools/suite/services/storage/internal/objects"
)

type keyArgs struct {
	Key string `json:"key"`
}

func (a *keyArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	return nil
}

func (t *Tools) head(ctx context.Context, call *service.Call, a keyArgs) *tool.Result {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad
	}
	obj, err := t.store.Head(ctx, ns, a.Key)
	if err != nil {
		return failure(err, false)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q: %s, %d bytes, etag %s", obj.Key, orUnknown(obj.ContentType), obj.Size, obj.ETag)
	if obj.LastModified != nil {
		fmt.Fprintf(&b, ", modified %s", obj.LastModified.UTC().Format(time.RFC3339))
	}
	for k, v := range obj.Metadata {
		fmt.Fprintf(&b, "\nmetadata %s: %s", k, v)
	}
	return structured(obj, tool.Text(b.String()))
}

type deleteResult struct {
	Key string `json:"key"`
	// Deleted is false when there was no such object (nothing to do).
	Deleted bool `json:"deleted"`
}

func (t *Tools) delete(ctx context.Context, call *service.Call, a keyArgs) *tool.Result {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad
	}
	existed, err := t.store.Delete(ctx, ns, a.Key)
	if err != nil {
		return failure(err, true)
	}
	text := fmt.Sprintf("deleted %q", a.Key)
	if !existed {
		text = fmt.Sprintf("%q did not exist; nothing deleted", a.Key)
	}
	return structured(deleteResult{Key: a.Key, Deleted: existed}, tool.Text(text))
}

// DefaultPresignSeconds is how long a presigned URL lives when
// expires_seconds is not given; MaxPresignSeconds is SigV4's 7 days.
const (
	DefaultPresignSeconds = 3600
	MaxPresignSeconds     = int(objects.MaxPresignExpiry / time.Second)
)

type presignArgs struct {
	Key            string `json:"key"`
	Method         string `json:"method"`
	ExpiresSeconds *int   `json:"expires_seconds"`
	ContentType    string `json:"content_type"`
}

func (a *presignArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	switch a.Method {
	case "", http.MethodGet:
		if a.ContentType != "" {
			return &strictjson.FieldError{Field: "content_type", Problem: "only for method PUT"}
		}
	case http.MethodPut:
		if a.ContentType != "" {
			if _, _, err := mime.ParseMediaType(a.ContentType); err != nil {
				return &strictjson.FieldError{Field: "content_type", Problem: fmt.Sprintf("%q is not a media type: %v", a.ContentType, err)}
			}
		}
	default:
		return &strictjson.FieldError{Field: "method", Problem: fmt.Sprintf("want GET or PUT, got %q", a.Method)}
	}
	if a.ExpiresSeconds != nil && (*a.ExpiresSeconds < 1 || *a.ExpiresSeconds > MaxPresignSeconds) {
		return &strictjson.FieldError{Field: "expires_seconds", Problem: fmt.Sprintf("must be from 1 to %d (7 days), got %d", MaxPresignSeconds, *a.ExpiresSeconds)}
	}
	return nil
}

func (t *Tools) presign(ctx context.Context, call *service.Call, a presignArgs) *tool.Result {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad
	}
	method := a.Method
	if method == "" {
		method = http.MethodGet
	}
	secs := DefaultPresignSeconds
	if a.ExpiresSeconds != nil {
		secs = *a.ExpiresSeconds
	}
	if method == http.MethodGet {
		// A download URL for nothing helps nobody: say so now.
		if _, err := t.store.Head(ctx, ns, a.Key); err != nil {
			return failure(err, false)
		}
	}
	p, err := t.store.Presign(ctx, ns, a.Key, method, time.Duration(secs)*time.Second, a.ContentType)
	if err != nil {
		return failure(err, false)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\nvalid until %s", p.Method, p.URL, p.Expires.Format(time.RFC3339))
	for k, v := range p.Headers {
		fmt.Fprintf(&b, "\nsend header %s: %s", k, v)
	}
	return structured(p, tool.Text(b.String()))
}
