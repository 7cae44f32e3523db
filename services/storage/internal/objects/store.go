// Package objects stores a caller's objects in an S3 bucket (AWS S3,
// Cloudflare R2 or any S3-compatible server) through aws-sdk-go-v2.
//
// Every method takes the caller's keys.Namespace and keys relative to it:
// the Store joins and strips the namespace prefix itself, so no key, listing
// or error it returns shows the prefix, and nothing outside the namespace
// can be named.
package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/brain-tools/suite/services/storage/internal/keys"
)

// MaxPresignExpiry is the longest a presigned URL can live: SigV4's 7 days.
const MaxPresignExpiry = 7 * 24 * time.Hour

// Store is a bucket seen through namespaces. It is safe for concurrent use.
type Store struct {
	bucket        string
	timeout       time.Duration
	healthTimeout time.Duration
	c             *clients
}

// New builds a Store from cfg. httpClient may be nil (the SDK's default).
func New(ctx context.Context, cfg Config, httpClient *http.Client) (*Store, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c, err := newClients(ctx, r, httpClient)
	if err != nil {
		return nil, err
	}
	return &Store{bucket: r.Bucket, timeout: r.RequestTimeout, healthTimeout: r.HealthTimeout, c: c}, nil
}

// Client returns the underlying S3 client (for health checks and
// benchmarks that compare against direct SDK calls).
func (s *Store) Client() *s3.Client { return s.c.api }

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// Object describes one stored object. Key is relative to the namespace.
type Object struct {
	Key          string            `json:"key"`
	Size         int64             `json:"size" schema:"minimum=0"`
	ContentType  string            `json:"content_type,omitempty"`
	ETag         string            `json:"etag,omitempty"`
	LastModified *time.Time        `json:"last_modified,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// Check verifies that the bucket exists and the credentials reach it
// (HeadBucket), for /healthz. It takes at most HealthTimeout (not
// RequestTimeout): a server that accepts the connection and never answers
// gives a KindUnavailable *Error saying "storage did not answer within
// 3s (STORAGE_HEALTH_TIMEOUT)".
func (s *Store) Check(ctx context.Context) error {
	limit := fmt.Errorf("storage did not answer within %s (STORAGE_HEALTH_TIMEOUT)", s.healthTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, s.healthTimeout, limit)
	defer cancel()
	_, err := s.c.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		if errors.Is(context.Cause(ctx), limit) {
			return &Error{Op: "head bucket", Kind: KindUnavailable, Msg: limit.Error(), Err: err}
		}
		return classify("head bucket", "", keys.Namespace{}, err)
	}
	return nil
}

// Put stores body under key with the given content type and user
// metadata: one PutObject for a body smaller than PartSize, a multipart
// upload through the transfer manager for larger ones. (The transfer
// manager reads a small body into a buffer of its own before its single
// PutObject; the body is in memory already, so that copy is skipped.)
func (s *Store) Put(ctx context.Context, ns keys.Namespace, key string, body []byte, contentType string, metadata map[string]string) (Object, error) {
	full, err := ns.Object(key)
	if err != nil {
		return Object{}, &Error{Op: "put", Key: key, Kind: KindInvalid, Msg: "key " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(full),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		Metadata:      metadata,
	}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	var etag *string
	if len(body) < PartSize {
		out, err := s.c.api.PutObject(ctx, in)
		if err != nil {
			return Object{}, classify("put", key, ns, err)
		}
		etag = out.ETag
	} else {
		out, err := s.c.uploader.UploadObject(ctx, &transfermanager.UploadObjectInput{
			Bucket: in.Bucket, Key: in.Key, Body: in.Body, ContentLength: in.ContentLength,
			ContentType: in.ContentType, Metadata: in.Metadata,
		})
		if err != nil {
			return Object{}, classify("put", key, ns, err)
		}
		etag = out.ETag
	}
	return Object{Key: key, Size: int64(len(body)), ContentType: contentType, ETag: unquote(aws.ToString(etag)), Metadata: metadata}, nil
}

// Get reads up to n bytes of key starting at offset (n ≥ 1, offset ≥ 0).
// The Object's Size is the whole object's size; data is shorter than n at
// the end of the object and empty when offset is at or past the end.
func (s *Store) Get(ctx context.Context, ns keys.Namespace, key string, offset, n int64) (Object, []byte, error) {
	return s.GetInto(ctx, ns, key, offset, n, nil)
}

// GetInto is Get reading into buf's memory when it is large enough (a
// buffer the caller recycles); data may share it.
func (s *Store) GetInto(ctx context.Context, ns keys.Namespace, key string, offset, n int64, buf []byte) (Object, []byte, error) {
	full, err := ns.Object(key)
	if err != nil {
		return Object{}, nil, &Error{Op: "get", Key: key, Kind: KindInvalid, Msg: "key " + err.Error()}
	}
	if offset < 0 || n < 1 {
		return Object{}, nil, &Error{Op: "get", Key: key, Kind: KindInvalid, Msg: fmt.Sprintf("range offset %d length %d", offset, n)}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.c.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(full),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+n-1)),
	})
	if err != nil {
		var e *Error
		if errors.As(classify("get", key, ns, err), &e) && e.Kind == KindRange {
			// S3 answers 416 for a range past the end, and for any range of
			// an empty object: report the object with no data.
			obj, herr := s.Head(ctx, ns, key)
			return obj, nil, herr
		}
		return Object{}, nil, classify("get", key, ns, err)
	}
	defer out.Body.Close()
	obj := Object{
		Key:          key,
		ContentType:  aws.ToString(out.ContentType),
		ETag:         unquote(aws.ToString(out.ETag)),
		LastModified: out.LastModified,
		Metadata:     out.Metadata,
	}
	body := io.Reader(out.Body)
	if total, ok := totalFromContentRange(aws.ToString(out.ContentRange)); ok {
		obj.Size = total
	} else {
		// The server ignored Range and sent the whole object.
		obj.Size = aws.ToInt64(out.ContentLength)
		if _, err := io.CopyN(io.Discard, body, offset); err != nil && !errors.Is(err, io.EOF) {
			return Object{}, nil, classify("get", key, ns, err)
		}
	}
	// Size the buffer once from Content-Length rather than growing it.
	capacity := n
	if cl := aws.ToInt64(out.ContentLength); cl >= 0 && cl < capacity {
		capacity = cl
	}
	// bytes.Buffer.ReadFrom wants MinRead bytes free before each read.
	b := bytes.NewBuffer(slices.Grow(buf[:0], int(capacity)+bytes.MinRead))
	if _, err := b.ReadFrom(io.LimitReader(body, n)); err != nil {
		return Object{}, nil, classify("get", key, ns, err)
	}
	return obj, b.Bytes(), nil
}

// totalFromContentRange parses the complete length of "bytes a-b/total".
func totalFromContentRange(cr string) (int64, bool) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok || total == "*" {
		return 0, false
	}
	v, err := strconv.ParseInt(total, 10, 64)
	return v, err == nil
}

// Head returns key's size, type and metadata.
func (s *Store) Head(ctx context.Context, ns keys.Namespace, key string) (Object, error) {
	full, err := ns.Object(key)
	if err != nil {
		return Object{}, &Error{Op: "head", Key: key, Kind: KindInvalid, Msg: "key " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(full)})
	if err != nil {
		return Object{}, classify("head", key, ns, err)
	}
	return Object{
		Key:          key,
		Size:         aws.ToInt64(out.ContentLength),
		ContentType:  aws.ToString(out.ContentType),
		ETag:         unquote(aws.ToString(out.ETag)),
		LastModified: out.LastModified,
		Metadata:     out.Metadata,
	}, nil
}

// List returns up to limit objects (1–1000, S3's page size) whose keys
// start with prefix, in key order, after the key startAfter ("" = from the
// start). more reports whether the listing continues past the last one.
func (s *Store) List(ctx context.Context, ns keys.Namespace, prefix, startAfter string, limit int) (objs []Object, more bool, err error) {
	full, err := ns.ListPrefix(prefix)
	if err != nil {
		return nil, false, &Error{Op: "list", Key: prefix, Kind: KindInvalid, Msg: "prefix " + err.Error()}
	}
	if limit < 1 || limit > 1000 {
		return nil, false, &Error{Op: "list", Key: prefix, Kind: KindInvalid, Msg: fmt.Sprintf("limit %d: want 1 to 1000", limit)}
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(full), MaxKeys: aws.Int32(int32(limit))}
	if startAfter != "" {
		// startAfter is a key of this namespace (the tool layer checks it),
		// and the listing is bounded by Prefix anyway.
		sa, err := ns.ListPrefix(startAfter)
		if err != nil {
			return nil, false, &Error{Op: "list", Key: prefix, Kind: KindInvalid, Msg: "cursor " + err.Error()}
		}
		in.StartAfter = aws.String(sa)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.c.api.ListObjectsV2(ctx, in)
	if err != nil {
		return nil, false, classify("list", prefix, ns, err)
	}
	objs = make([]Object, 0, len(out.Contents))
	for _, o := range out.Contents {
		k, ok := ns.Relative(aws.ToString(o.Key))
		if !ok || k == "" {
			continue // never show anything outside the namespace
		}
		objs = append(objs, Object{Key: k, Size: aws.ToInt64(o.Size), ETag: unquote(aws.ToString(o.ETag)), LastModified: o.LastModified})
	}
	return objs, aws.ToBool(out.IsTruncated), nil
}

// Delete removes key. existed reports whether it was there: S3's
// DeleteObject succeeds either way, so Delete asks HeadObject first.
func (s *Store) Delete(ctx context.Context, ns keys.Namespace, key string) (existed bool, err error) {
	full, err := ns.Object(key)
	if err != nil {
		return false, &Error{Op: "delete", Key: key, Kind: KindInvalid, Msg: "key " + err.Error()}
	}
	if _, err := s.Head(ctx, ns, key); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Kind == KindNotFound {
			return false, nil
		}
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.c.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(full)}); err != nil {
		return true, classify("delete", key, ns, err)
	}
	return true, nil
}

// Presigned is a presigned request: whoever holds URL can make it until
// Expires, sending Headers with it.
type Presigned struct {
	Method  string            `json:"method" schema:"enum=GET|PUT"`
	URL     string            `json:"url" schema:"format=uri"`
	Expires time.Time         `json:"expires_at"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Presign signs a GET or PUT of key valid for expires (1 s to 7 days, the
// SigV4 limit). For PUT, a non-empty contentType is signed and must be sent
// as the Content-Type header. Request checksums are never part of a
// presigned URL: the client making the request could not compute them.
func (s *Store) Presign(ctx context.Context, ns keys.Namespace, key, method string, expires time.Duration, contentType string) (Presigned, error) {
	full, err := ns.Object(key)
	if err != nil {
		return Presigned{}, &Error{Op: "presign", Key: key, Kind: KindInvalid, Msg: "key " + err.Error()}
	}
	if expires < time.Second || expires > MaxPresignExpiry {
		return Presigned{}, &Error{Op: "presign", Key: key, Kind: KindInvalid, Msg: fmt.Sprintf("expiry %s: want 1s to %s", expires, MaxPresignExpiry)}
	}
	noChecksum := func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired }
	signedAt := time.Now()
	var req *presignedRequest
	switch method {
	case http.MethodGet:
		r, err := s.c.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(full)},
			s3.WithPresignExpires(expires), withClientOptions(noChecksum))
		if err != nil {
			return Presigned{}, classify("presign", key, ns, err)
		}
		req = &presignedRequest{r.URL, r.Method, r.SignedHeader}
	case http.MethodPut:
		in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(full)}
		if contentType != "" {
			in.ContentType = aws.String(contentType)
		}
		r, err := s.c.presign.PresignPutObject(ctx, in, s3.WithPresignExpires(expires), withClientOptions(noChecksum))
		if err != nil {
			return Presigned{}, classify("presign", key, ns, err)
		}
		req = &presignedRequest{r.URL, r.Method, r.SignedHeader}
	default:
		return Presigned{}, &Error{Op: "presign", Key: key, Kind: KindInvalid, Msg: fmt.Sprintf("method %q: want GET or PUT", method)}
	}
	p := Presigned{Method: req.method, URL: req.url, Expires: signedAt.Add(expires).UTC().Truncate(time.Second)}
	for name, vals := range req.headers {
		// Host is set by every HTTP client from the URL.
		if strings.EqualFold(name, "Host") || len(vals) == 0 {
			continue
		}
		if p.Headers == nil {
			p.Headers = map[string]string{}
		}
		p.Headers[http.CanonicalHeaderKey(name)] = strings.Join(vals, ",")
	}
	return p, nil
}

type presignedRequest struct {
	url, method string
	headers     http.Header
}

func withClientOptions(fns ...func(*s3.Options)) func(*s3.PresignOptions) {
	return func(o *s3.PresignOptions) { o.ClientOptions = append(o.ClientOptions, fns...) }
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }
