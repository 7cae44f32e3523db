// Package keys confines object keys to a caller's namespace in the bucket.
//
// Every object a tool call touches lives under a prefix built from the
// request body's tenant_id (and, in session mode, its session_id), never from
// anything the model put in the arguments. A caller names objects with keys
// relative to that prefix; this package validates those keys, joins them to
// the prefix, and strips the prefix again so that results never show it.
package keys

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest object key S3 accepts, in bytes of UTF-8. It
// bounds both the caller's key and the full key with the namespace prefix.
const MaxKeyBytes = 1024

// Mode selects what a namespace is built from.
type Mode string

const (
	// ModeTenant gives each tenant one namespace shared by all its sessions.
	ModeTenant Mode = "tenant"
	// ModeSession gives each session of each tenant its own namespace.
	ModeSession Mode = "session"
)

// ParseMode returns the Mode named s ("tenant" or "session").
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeTenant, ModeSession:
		return m, nil
	}
	return "", fmt.Errorf("key prefix mode %q: want %q or %q", s, ModeTenant, ModeSession)
}

// Namespace is one caller's part of the bucket: every full key it produces
// starts with its prefix. The zero value is unusable; build one with New.
type Namespace struct {
	prefix string
}

// New builds the namespace of a tool call. root is a fixed prefix for all
// namespaces ("" or a valid key prefix ending in "/"); tenantID and, in
// ModeSession, sessionID come from the request body. Each ID becomes one
// path-escaped segment, so an ID containing "/" or "%" can neither reach
// another tenant's prefix nor collide with one. IDs that are empty, "." or
// ".." are refused.
func New(root string, mode Mode, tenantID, sessionID string) (Namespace, error) {
	if err := checkRoot(root); err != nil {
		return Namespace{}, err
	}
	var b strings.Builder
	b.WriteString(root)
	t, err := segment(tenantID)
	if err != nil {
		return Namespace{}, fmt.Errorf("tenant_id: %w", err)
	}
	b.WriteString(t)
	b.WriteByte('/')
	switch mode {
	case ModeTenant:
	case ModeSession:
		s, err := segment(sessionID)
		if err != nil {
			return Namespace{}, fmt.Errorf("session_id: %w", err)
		}
		b.WriteString(s)
		b.WriteByte('/')
	default:
		return Namespace{}, fmt.Errorf("key prefix mode %q: want %q or %q", mode, ModeTenant, ModeSession)
	}
	if b.Len() >= MaxKeyBytes {
		return Namespace{}, fmt.Errorf("namespace prefix is %d bytes, leaving no room for keys under the %d-byte limit", b.Len(), MaxKeyBytes)
	}
	return Namespace{prefix: b.String()}, nil
}

func segment(id string) (string, error) {
	switch id {
	case "":
		return "", errors.New("empty")
	case ".", "..":
		return "", fmt.Errorf("%q is not usable as a storage namespace", id)
	}
	seg := url.PathEscape(id)
	if err := reservedSegment(seg); err != nil {
		return "", fmt.Errorf("%q is not usable as a storage namespace: %w", id, err)
	}
	return seg, nil
}

// ReservedSegment is the path segment versitygw's posix backend keeps
// for its own staging files (.sgwtmp at the top of a bucket and of its
// version directories); its listings skip a directory of that name at any
// depth, so an object under it is written but never listed. Temporary
// names ".<name>.sgwtmp.<n>" appear beside objects while they are
// replaced.
const ReservedSegment = ".sgwtmp"

// reservedSegment refuses a segment of a full key that the S3 server
// reserves. The rule holds on every backend, so a key means the same
// wherever the bucket lives.
func reservedSegment(seg string) error {
	if seg == ReservedSegment || strings.HasPrefix(seg, ".") && strings.Contains(seg, ReservedSegment+".") {
		return fmt.Errorf("the segment %q is reserved by the S3 server (versitygw keeps its staging files under %s)", seg, ReservedSegment)
	}
	return nil
}

func checkRoot(root string) error {
	if root == "" {
		return nil
	}
	if !strings.HasSuffix(root, "/") {
		return fmt.Errorf("root prefix %q: must end with /", root)
	}
	if err := check(strings.TrimSuffix(root, "/"), false); err != nil {
		return fmt.Errorf("root prefix %q: %w", root, err)
	}
	return nil
}

// Prefix returns the namespace's prefix in the bucket. It is for logs and
// tests; never show it to the model.
func (n Namespace) Prefix() string { return n.prefix }

// MaxKeyBytes returns the longest key this namespace can hold: the smaller
// of MaxKeyBytes and what the prefix leaves of S3's 1024-byte limit.
func (n Namespace) MaxKeyBytes() int { return MaxKeyBytes - len(n.prefix) }

// Object validates key (see Validate) and returns the full key in the bucket.
// Besides Validate's rules, the full key must fit S3's 1024-byte limit.
func (n Namespace) Object(key string) (string, error) {
	if n.prefix == "" {
		return "", errors.New("namespace not initialised")
	}
	if err := Validate(key); err != nil {
		return "", err
	}
	if max := n.MaxKeyBytes(); len(key) > max {
		return "", fmt.Errorf("is %d bytes; in this namespace keys are limited to %d bytes", len(key), max)
	}
	return n.prefix + key, nil
}

// ListPrefix validates a listing prefix (see ValidatePrefix) and returns the
// full prefix in the bucket; "" lists the whole namespace.
func (n Namespace) ListPrefix(prefix string) (string, error) {
	if n.prefix == "" {
		return "", errors.New("namespace not initialised")
	}
	if err := ValidatePrefix(prefix); err != nil {
		return "", err
	}
	if max := n.MaxKeyBytes(); len(prefix) > max {
		return "", fmt.Errorf("is %d bytes; in this namespace keys are limited to %d bytes", len(prefix), max)
	}
	return n.prefix + prefix, nil
}

// Relative strips the namespace prefix from a full key found in the bucket.
// ok is false when full is outside the namespace; such a key must never be
// shown.
func (n Namespace) Relative(full string) (key string, ok bool) {
	if n.prefix == "" || !strings.HasPrefix(full, n.prefix) {
		return "", false
	}
	return full[len(n.prefix):], true
}

// Redact replaces every occurrence of the namespace prefix in s (an error
// message from the S3 server, say) with nothing, so the prefix never leaks.
func (n Namespace) Redact(s string) string {
	if n.prefix == "" {
		return s
	}
	s = strings.ReplaceAll(s, n.prefix, "")
	// Servers also echo keys URL-escaped.
	if esc := url.PathEscape(n.prefix); esc != n.prefix {
		s = strings.ReplaceAll(s, esc, "")
	}
	return s
}

// Validate checks an object key named by a caller: 1 to MaxKeyBytes bytes of
// valid UTF-8, no control characters (Unicode Cc), no leading "/", and no
// empty, "." or ".." segment between slashes (so no "//" and no trailing
// "/"). The segment rules keep keys meaning the same thing on S3 and on
// file-system backed servers such as versitygw's posix backend, where "..",
// "." and "//" would be resolved as paths. The error names the problem, not
// the field.
func Validate(key string) error {
	if key == "" {
		return errors.New("empty")
	}
	return check(key, false)
}

// ValidatePrefix checks a listing prefix: like Validate, but it may be empty
// and may end with "/".
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return check(prefix, true)
}

func check(s string, trailingSlash bool) error {
	if len(s) > MaxKeyBytes {
		return fmt.Errorf("is %d bytes, longer than the %d-byte limit", len(s), MaxKeyBytes)
	}
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("has control character %U at byte %d", r, i)
		}
	}
	if strings.HasPrefix(s, "/") {
		return errors.New("starts with /; keys are relative to your storage namespace")
	}
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		if err := reservedSegment(seg); err != nil {
			return errors.New("has " + strings.TrimPrefix(err.Error(), "the "))
		}
		switch seg {
		case "..", ".":
			return fmt.Errorf("has a %q segment", seg)
		case "":
			if i == len(segs)-1 && trailingSlash {
				continue
			}
			if i == len(segs)-1 {
				return errors.New("ends with /; an object key names an object, not a folder")
			}
			return errors.New("has an empty segment (//)")
		}
	}
	return nil
}
