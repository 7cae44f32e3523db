// Package tools serves the storage tools (storage_put, storage_get,
// storage_head, storage_list, storage_delete, storage_presign) on top of an
// objects.Store.
//
// Each call's namespace is built from the request body's tenant_id (and
// session_id in session mode), never from arguments: the tool contract says
// to authorize with the session's identity only. Results stay under the
// binding's max_output_bytes; larger objects are read in ranges or through
// presigned URLs.
package tools

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/keys"
	"github.com/brain-tools/suite/services/storage/internal/objects"
)

// Config is the tools' own settings, parsed from the environment.
type Config struct {
	// KeyPrefixMode is tenant (one namespace per tenant) or session (one per
	// session of each tenant) (env STORAGE_KEY_PREFIX_MODE).
	KeyPrefixMode string `env:"STORAGE_KEY_PREFIX_MODE" envDefault:"tenant"`
	// KeyRoot is a prefix above every namespace, "" or ending in "/"
	// (env STORAGE_KEY_ROOT), e.g. "brain/" to share a bucket.
	KeyRoot string `env:"STORAGE_KEY_ROOT"`
	// MaxPutBytes caps the object storage_put stores, after base64
	// decoding (env STORAGE_MAX_PUT_BYTES, default 2 MiB). The request body
	// cap MAX_REQUEST_BYTES (4 MiB) must hold it base64-encoded plus 32 KiB
	// for key, metadata and envelope, or the service does not start;
	// larger objects go through storage_presign with method PUT.
	MaxPutBytes int64 `env:"STORAGE_MAX_PUT_BYTES" envDefault:"2097152"`
	// MaxOutputBytes is the max_output_bytes of the bindings, which every
	// result stays under (env STORAGE_MAX_OUTPUT_BYTES, default 1 MiB, at
	// most 2 MiB: the contract's limit).
	MaxOutputBytes int64 `env:"STORAGE_MAX_OUTPUT_BYTES" envDefault:"1048576"`
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	var errs []error
	if _, err := keys.ParseMode(c.KeyPrefixMode); err != nil {
		errs = append(errs, fmt.Errorf("STORAGE_KEY_PREFIX_MODE: %w", err))
	}
	if _, err := keys.New(c.KeyRoot, keys.ModeTenant, "t", ""); err != nil {
		errs = append(errs, fmt.Errorf("STORAGE_KEY_ROOT: %w", err))
	}
	if c.MaxPutBytes < 1 {
		errs = append(errs, fmt.Errorf("STORAGE_MAX_PUT_BYTES must be positive, got %d", c.MaxPutBytes))
	}
	if c.MaxOutputBytes < minOutputBytes || c.MaxOutputBytes > tool.MaxOutputBytesLimit {
		errs = append(errs, fmt.Errorf("STORAGE_MAX_OUTPUT_BYTES must be from %d to %d, got %d", minOutputBytes, tool.MaxOutputBytesLimit, c.MaxOutputBytes))
	}
	return errors.Join(errs...)
}

// PutEnvelopeBytes is what a storage_put request needs beside its data:
// the request envelope (tenant, session and call IDs), a 1024-byte key,
// a content type and 2 KB of metadata, JSON-escaped at worst, with room to
// spare.
const PutEnvelopeBytes = 32 << 10

// CheckCarried refuses a put limit that the service's request body cap
// cannot carry: a put of maxPut bytes travels base64-encoded (4 bytes per
// 3) in a request of at most maxRequest bytes (MAX_REQUEST_BYTES). The
// error names both settings and the largest put limit that would fit.
func CheckCarried(maxPut, maxRequest int64) error {
	need := base64Len(maxPut) + PutEnvelopeBytes
	if need <= maxRequest {
		return nil
	}
	fits := (maxRequest - PutEnvelopeBytes) / 4 * 3
	if fits < 0 {
		fits = 0
	}
	return fmt.Errorf("STORAGE_MAX_PUT_BYTES %d cannot be carried by MAX_REQUEST_BYTES %d: a put that size is %d bytes of base64 plus up to %d bytes of key, metadata and envelope (%d in all); raise MAX_REQUEST_BYTES to at least %d or lower STORAGE_MAX_PUT_BYTES to at most %d",
		maxPut, maxRequest, base64Len(maxPut), PutEnvelopeBytes, need, need, fits)
}

// base64Len is the length of n bytes in standard, padded base64.
func base64Len(n int64) int64 { return (n + 2) / 3 * 4 }

// minOutputBytes leaves room for the largest key and metadata a result
// can echo (1 KiB key and 2 KiB metadata, JSON-escaped) plus some data.
const minOutputBytes = 64 << 10

// Tools serves the storage tools for one Store.
type Tools struct {
	store *objects.Store
	cfg   Config
	mode  keys.Mode
}

// New returns the tools over store. cfg must be valid (see Validate).
func New(store *objects.Store, cfg Config) (*Tools, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mode, _ := keys.ParseMode(cfg.KeyPrefixMode)
	return &Tools{store: store, cfg: cfg, mode: mode}, nil
}

// List returns the six tools with their bindings. Their input schemas are
// inferred from the argument types (storage_put's is written out: its
// metadata names and the choice of text or data_base64 are more than tags
// say), their output schemas from the result types.
func (t *Tools) List() []service.Tool {
	f := false
	b := func(name, title, desc string, out json.RawMessage, ann *tool.Annotations) tool.Binding {
		return tool.Binding{
			Name:           name,
			Title:          title,
			Description:    desc,
			OutputSchema:   out,
			TimeoutSeconds: 120,
			MaxOutputBytes: t.cfg.MaxOutputBytes,
			Annotations:    ann,
		}
	}
	// Storage is the tenant's own bucket prefix: a closed world. A put
	// overwrites (destructive) and a second identical put changes nothing;
	// a delete is destructive and idempotent; a presigned URL changes
	// nothing until someone uses it.
	write := &tool.Annotations{IdempotentHint: true, OpenWorldHint: &f}
	put := b("storage_put", "Store an object", putDescription(t.cfg.MaxPutBytes), objectOutSchema, write)
	put.InputSchema = json.RawMessage(putSchema)
	return []service.Tool{
		t.putTool(put),
		service.NewTool(b("storage_get", "Read an object", getDescription, getOutSchema, tool.ReadOnly()), t.get),
		service.NewTool(b("storage_head", "Describe an object", headDescription, objectOutSchema, tool.ReadOnly()), t.head),
		service.NewTool(b("storage_list", "List objects", listDescription, listOutSchema, tool.ReadOnly()), t.list),
		service.NewTool(b("storage_delete", "Delete an object", deleteDescription, deleteOutSchema, write), t.delete),
		service.NewTool(b("storage_presign", "Make a presigned URL", presignDescription, presignOutSchema, tool.ReadOnly()), t.presign),
	}
}

// The output schemas, from the types of the results' structured_content.
var (
	objectOutSchema  = schema.MustFor[objects.Object]()
	getOutSchema     = schema.MustFor[getResult]()
	listOutSchema    = schema.MustFor[listResult]()
	deleteOutSchema  = schema.MustFor[deleteResult]()
	presignOutSchema = schema.MustFor[objects.Presigned]()
)

// namespace builds the call's namespace from the request body's identity.
func (t *Tools) namespace(call *service.Call) (keys.Namespace, *tool.Result) {
	ns, err := keys.New(t.cfg.KeyRoot, t.mode, call.TenantID, call.SessionID)
	if err != nil {
		return keys.Namespace{}, tool.Errorf("storage namespace: %v", err)
	}
	return ns, nil
}

// checkKey applies the namespace's own limit (S3's 1024 bytes for the
// full key) to a key that passed keys.Validate, naming the argument.
func checkKey(ns keys.Namespace, field, key string) *tool.Result {
	var err error
	if field == "prefix" {
		_, err = ns.ListPrefix(key)
	} else {
		_, err = ns.Object(key)
	}
	if err != nil {
		return fieldErr(field, "%v", err)
	}
	return nil
}

// failure turns a Store error into an is_error result. For put and delete,
// a failure that may have happened after the server acted (network, 5xx)
// is an unknown outcome, as the contract's outcome table asks.
func failure(err error, mutating bool) *tool.Result {
	r := tool.Errorf("%v", err)
	var e *objects.Error
	if errors.As(err, &e) && mutating && e.Kind == objects.KindUnavailable {
		r.UnknownOutcome = true
	}
	return r
}

// structured builds a result with v as structured_content and text blocks.
func structured(v any, blocks ...tool.Content) *tool.Result {
	data, err := json.Marshal(v)
	if err != nil {
		return tool.Errorf("encode result: %v", err)
	}
	return &tool.Result{Content: blocks, StructuredContent: data}
}

// fieldErr names the argument at fault in the words of the runtime's own
// argument errors ("invalid arguments: key: ...").
func fieldErr(field, format string, args ...any) *tool.Result {
	return tool.Errorf("invalid arguments: %s: %s", field, fmt.Sprintf(format, args...))
}
