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
	Key string `json:"key" jsonschema:"Object key relative to your storage, e.g. \"notes/today.md\"." schema:"minLength=1,maxLength=1024"`
}

func (a *keyArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	return nil
}

func (t *Tools) head(ctx context.Context, call *service.Call, a keyArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad, nil
	}
	obj, err := t.store.Head(ctx, ns, a.Key)
	if err != nil {
		return failure(err, false), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q: %s, %d bytes, etag %s", obj.Key, orUnknown(obj.ContentType), obj.Size, obj.ETag)
	if obj.LastModified != nil {
		fmt.Fprintf(&b, ", modified %s", obj.LastModified.UTC().Format(time.RFC3339))
	}
	for k, v := range obj.Metadata {
		fmt.Fprintf(&b, "\nmetadata %s: %s", k, v)
	}
	return structured(obj, tool.Text(b.String())), nil
}

type deleteResult struct {
	Key string `json:"key"`
	// Deleted is false when there was no such object (nothing to do).
	Deleted bool `json:"deleted"`
}

func (t *Tools) delete(ctx context.Context, call *service.Call, a keyArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad, nil
	}
	existed, err := t.store.Delete(ctx, ns, a.Key)
	if err != nil {
		return failure(err, true), nil
	}
	text := fmt.Sprintf("deleted %q", a.Key)
	if !existed {
		text = fmt.Sprintf("%q did not exist; nothing deleted", a.Key)
	}
	return structured(deleteResult{Key: a.Key, Deleted: existed}, tool.Text(text)), nil
}

// DefaultPresignSeconds is how long a presigned URL lives when
// expires_seconds is not given; MaxPresignSeconds is SigV4's 7 days.
const (
	DefaultPresignSeconds = 3600
	MaxPresignSeconds     = int(objects.MaxPresignExpiry / time.Second)
)

type presignArgs struct {
	Key            string `json:"key" jsonschema:"Object key relative to your storage, e.g. \"notes/today.md\"." schema:"minLength=1,maxLength=1024"`
	Method         string `json:"method,omitempty" jsonschema:"GET to download (default), PUT to upload." schema:"enum=GET|PUT"`
	ExpiresSeconds *int   `json:"expires_seconds,omitempty" jsonschema:"Lifetime of the URL; default 3600." schema:"minimum=1,maximum=604800,default=3600"`
	ContentType    string `json:"content_type,omitempty" jsonschema:"PUT only: the Content-Type the upload must send." schema:"maxLength=255"`
}

func (a *presignArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	// The schema holds the method to GET or PUT.
	if a.ContentType == "" {
		return nil
	}
	if a.Method != http.MethodPut {
		return &strictjson.FieldError{Field: "content_type", Problem: "only for method PUT"}
	}
	if _, _, err := mime.ParseMediaType(a.ContentType); err != nil {
		return &strictjson.FieldError{Field: "content_type", Problem: fmt.Sprintf("%q is not a media type: %v", a.ContentType, err)}
	}
	return nil
}

func (t *Tools) presign(ctx context.Context, call *service.Call, a presignArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad, nil
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
			return failure(err, false), nil
		}
	}
	p, err := t.store.Presign(ctx, ns, a.Key, method, time.Duration(secs)*time.Second, a.ContentType)
	if err != nil {
		return failure(err, false), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\nvalid until %s", p.Method, p.URL, p.Expires.Format(time.RFC3339))
	for k, v := range p.Headers {
		fmt.Fprintf(&b, "\nsend header %s: %s", k, v)
	}
	return structured(p, tool.Text(b.String())), nil
}
