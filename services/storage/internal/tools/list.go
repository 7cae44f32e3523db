package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/keys"
)

// DefaultListLimit is storage_list's page size when limit is not given;
// MaxListLimit is S3's own page size limit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

type listArgs struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"Only keys starting with this, e.g. \"reports/\"; default all." schema:"maxLength=1024"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page." schema:"maxLength=2048"`
	Limit  *int   `json:"limit,omitempty" jsonschema:"Objects per page; default 100." schema:"minimum=1,maximum=1000,default=100"`
}

// Validate holds what a schema cannot say: the prefix's key rules
// (keys.ValidatePrefix) and a cursor storage_list made.
func (a *listArgs) Validate() error {
	if err := keys.ValidatePrefix(a.Prefix); err != nil {
		return &strictjson.FieldError{Field: "prefix", Problem: err.Error()}
	}
	if _, err := decodeCursor(a.Cursor); err != nil {
		return &strictjson.FieldError{Field: "cursor", Problem: err.Error()}
	}
	return nil
}

// A cursor is the last key a page showed, base64url-encoded: the next page
// starts after it. It is a key of the caller's own namespace, checked like
// any prefix, so a crafted cursor can neither escape the namespace nor
// name another tenant's keys (the listing is also bounded by the prefix).
func encodeCursor(key string) string { return base64.RawURLEncoding.EncodeToString([]byte(key)) }

func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) == 0 {
		return "", fmt.Errorf("not a cursor from storage_list")
	}
	if err := keys.ValidatePrefix(string(b)); err != nil {
		return "", fmt.Errorf("not a cursor from storage_list")
	}
	return string(b), nil
}

type listEntry struct {
	Key          string     `json:"key"`
	Size         int64      `json:"size" schema:"minimum=0"`
	LastModified *time.Time `json:"last_modified,omitempty"`
	ETag         string     `json:"etag,omitempty"`
}

// listResult is storage_list's structured_content.
type listResult struct {
	Prefix  string      `json:"prefix"`
	Objects []listEntry `json:"objects"`
	// NextCursor, when set, lists the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (t *Tools) list(ctx context.Context, call *service.Call, a listArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "prefix", a.Prefix); bad != nil {
		return bad, nil
	}
	limit := DefaultListLimit
	if a.Limit != nil {
		limit = *a.Limit
	}
	after, _ := decodeCursor(a.Cursor)
	objs, more, err := t.store.List(ctx, ns, a.Prefix, after, limit)
	if err != nil {
		return failure(err, false), nil
	}
	// Keep the page inside the output limit: entries are counted twice,
	// in structured_content and in the text lines, and a cut page ends
	// with a cursor at the last entry shown.
	res := listResult{Prefix: a.Prefix, Objects: []listEntry{}}
	var lines strings.Builder
	used := encodedLen(listResult{Prefix: a.Prefix, NextCursor: encodeCursor(strings.Repeat("k", keys.MaxKeyBytes))}) +
		encodedLen(tool.Result{Content: []tool.Content{tool.Text(listFooter(a.Prefix, 0, strings.Repeat("c", 2000)))}}) + 512 + sseMargin
	cut := false
	for _, o := range objs {
		e := listEntry{Key: o.Key, Size: o.Size, LastModified: o.LastModified, ETag: o.ETag}
		line := listLine(e)
		cost := encodedLen(e) + 1 + encodedLen(line) - 2
		if used+cost > int(t.cfg.MaxOutputBytes) {
			cut = true
			break
		}
		used += cost
		res.Objects = append(res.Objects, e)
		lines.WriteString(line)
	}
	if (more || cut) && len(res.Objects) > 0 {
		res.NextCursor = encodeCursor(res.Objects[len(res.Objects)-1].Key)
	}
	lines.WriteString(listFooter(a.Prefix, len(res.Objects), res.NextCursor))
	return structured(res, tool.Text(lines.String())), nil
}

func listLine(e listEntry) string {
	mod := ""
	if e.LastModified != nil {
		mod = e.LastModified.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s\t%d\t%s\n", e.Key, e.Size, mod)
}

func listFooter(prefix string, n int, cursor string) string {
	var b strings.Builder
	if prefix == "" {
		fmt.Fprintf(&b, "%d objects", n)
	} else {
		fmt.Fprintf(&b, "%d objects under %q", n, prefix)
	}
	if cursor != "" {
		fmt.Fprintf(&b, "; more: call storage_list with cursor %q", cursor)
	}
	return b.String()
}
