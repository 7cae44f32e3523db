package objects

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/brain-tools/suite/pkg/tracing"
)

// Providers the store can talk to (env STORAGE_PROVIDER).
const (
	// ProviderS3 is AWS S3: default endpoint, virtual-hosted style, the
	// SDK's default checksums. Without static keys it uses the default AWS
	// credential chain (AWS_* env, shared files, instance roles).
	ProviderS3 = "s3"
	// ProviderR2 is Cloudflare R2: endpoint
	// https://<account>.r2.cloudflarestorage.com, region auto.
	ProviderR2 = "r2"
	// ProviderCompatible is any other S3-compatible server (versitygw,
	// MinIO, Ceph): STORAGE_ENDPOINT required.
	ProviderCompatible = "s3-compatible"
)

// Config is the storage service's S3 settings, parsed from the environment
// with github.com/caarlos0/env/v11.
type Config struct {
	// Provider is s3, r2 or s3-compatible (env STORAGE_PROVIDER).
	Provider string `env:"STORAGE_PROVIDER" envDefault:"s3"`
	// Endpoint is the S3 API base URL (env STORAGE_ENDPOINT), e.g.
	// http://127.0.0.1:7070. Required for s3-compatible; for r2 it defaults
	// to the account endpoint; for s3 empty means AWS's own endpoints.
	Endpoint string `env:"STORAGE_ENDPOINT"`
	// R2AccountID builds the R2 endpoint (env STORAGE_R2_ACCOUNT_ID).
	R2AccountID string `env:"STORAGE_R2_ACCOUNT_ID"`
	// Region is the signing region (env STORAGE_REGION). Defaults to
	// us-east-1, and to auto for r2.
	Region string `env:"STORAGE_REGION"`
	// Bucket holds every tenant's objects (env STORAGE_BUCKET). Required.
	Bucket string `env:"STORAGE_BUCKET"`
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials
	// (env STORAGE_ACCESS_KEY_ID, STORAGE_SECRET_ACCESS_KEY,
	// STORAGE_SESSION_TOKEN). Required except for s3, which falls back to
	// the default AWS credential chain.
	AccessKeyID string `env:"STORAGE_ACCESS_KEY_ID"`
	// SecretAccessKey is the secret of AccessKeyID (env
	// STORAGE_SECRET_ACCESS_KEY).
	SecretAccessKey string `env:"STORAGE_SECRET_ACCESS_KEY"`
	// SessionToken is the session token of temporary credentials (env
	// STORAGE_SESSION_TOKEN); empty for long-lived keys.
	SessionToken string `env:"STORAGE_SESSION_TOKEN"`
	// PathStyle is auto, true or false (env STORAGE_PATH_STYLE). auto means
	// path-style for every endpoint that is not AWS, which local servers
	// need, and virtual-hosted style for AWS.
	PathStyle string `env:"STORAGE_PATH_STYLE" envDefault:"auto"`
	// PresignEndpoint, when set, is the base URL put into presigned URLs
	// instead of Endpoint (env STORAGE_PRESIGN_ENDPOINT): the address
	// clients outside the service's network use, e.g. in compose.
	PresignEndpoint string `env:"STORAGE_PRESIGN_ENDPOINT"`
	// RequestTimeout bounds each S3 request (env STORAGE_REQUEST_TIMEOUT).
	RequestTimeout time.Duration `env:"STORAGE_REQUEST_TIMEOUT" envDefault:"60s"`
	// HealthTimeout bounds the /healthz probe (HeadBucket) (env
	// STORAGE_HEALTH_TIMEOUT): a health check must answer fast even when
	// the S3 server accepts connections and never replies. Zero means
	// DefaultHealthTimeout; negative is an error.
	HealthTimeout time.Duration `env:"STORAGE_HEALTH_TIMEOUT" envDefault:"3s"`
}

// DefaultHealthTimeout is HealthTimeout when unset: a few seconds, well
// under STORAGE_REQUEST_TIMEOUT, so a hung S3 server makes /healthz
// answer 503 instead of hanging with it.
const DefaultHealthTimeout = 3 * time.Second

// PartSize is the part size of multipart uploads and the size from which
// Store.Put uploads in parts (8 MiB; the transfer manager's own threshold
// is 16 MiB); a smaller body goes in one PutObject.
const PartSize = 8 << 20

// resolved is Config with defaults applied and checked.
type resolved struct {
	Config
	pathStyle bool
	aws       bool // the endpoint is AWS's: keep the SDK's default checksums
}

func (c Config) resolve() (resolved, error) {
	r := resolved{Config: c}
	var errs []error
	switch c.Provider {
	case ProviderS3:
		if c.Region == "" {
			r.Region = "us-east-1"
		}
	case ProviderR2:
		if c.Region == "" {
			r.Region = "auto"
		}
		if c.Endpoint == "" {
			if c.R2AccountID == "" {
				errs = append(errs, errors.New("STORAGE_R2_ACCOUNT_ID or STORAGE_ENDPOINT is required for provider r2"))
			}
			r.Endpoint = "https://" + c.R2AccountID + ".r2.cloudflarestorage.com"
		}
	case ProviderCompatible:
		if c.Region == "" {
			r.Region = "us-east-1"
		}
		if c.Endpoint == "" {
			errs = append(errs, errors.New("STORAGE_ENDPOINT is required for provider s3-compatible"))
		}
	default:
		errs = append(errs, fmt.Errorf("STORAGE_PROVIDER %q: want s3, r2 or s3-compatible", c.Provider))
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("STORAGE_BUCKET is required"))
	}
	for _, e := range []struct{ name, value string }{{"STORAGE_ENDPOINT", r.Endpoint}, {"STORAGE_PRESIGN_ENDPOINT", c.PresignEndpoint}} {
		if e.value == "" {
			continue
		}
		u, err := url.Parse(e.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			errs = append(errs, fmt.Errorf("%s %q: want an http or https base URL without credentials", e.name, e.value))
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		errs = append(errs, errors.New("STORAGE_ACCESS_KEY_ID and STORAGE_SECRET_ACCESS_KEY must be set together"))
	}
	if c.AccessKeyID == "" && c.Provider != ProviderS3 {
		errs = append(errs, fmt.Errorf("STORAGE_ACCESS_KEY_ID and STORAGE_SECRET_ACCESS_KEY are required for provider %s", c.Provider))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("STORAGE_REQUEST_TIMEOUT must be positive, got %s", c.RequestTimeout))
	}
	switch {
	case c.HealthTimeout < 0:
		errs = append(errs, fmt.Errorf("STORAGE_HEALTH_TIMEOUT must be positive, got %s", c.HealthTimeout))
	case c.HealthTimeout == 0:
		r.HealthTimeout = DefaultHealthTimeout
	}
	r.aws = c.Provider == ProviderS3 && isAWSEndpoint(r.Endpoint)
	switch c.PathStyle {
	case "auto":
		r.pathStyle = !r.aws
	case "true":
		r.pathStyle = true
	case "false":
	default:
		errs = append(errs, fmt.Errorf("STORAGE_PATH_STYLE %q: want auto, true or false", c.PathStyle))
	}
	return r, errors.Join(errs...)
}

// isAWSEndpoint reports whether endpoint is AWS's own: empty (the SDK's
// resolver) or a host under amazonaws.com.
func isAWSEndpoint(endpoint string) bool {
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "amazonaws.com" || strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn")
}

// clients are the SDK clients a Store uses.
type clients struct {
	api      *s3.Client
	uploader *transfermanager.Client // bodies of PartSize and more
	presign  *s3.PresignClient
}

// newClients builds the S3 client, transfer manager and presign client.
// For every endpoint that is not AWS, request checksums and response
// validation are set to WhenRequired on the client and on the transfer
// manager (which does not inherit the client's setting): since service/s3
// v1.73 the SDK's default CRC32 checksums and aws-chunked trailers are
// refused or mangled by R2, MinIO, Ceph and others.
func newClients(ctx context.Context, r resolved, httpClient *http.Client) (*clients, error) {
	var cfg aws.Config
	if r.AccessKeyID != "" {
		cfg = aws.Config{
			Region:      r.Region,
			Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(r.AccessKeyID, r.SecretAccessKey, r.SessionToken)),
		}
	} else {
		var err error
		cfg, err = awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(r.Region))
		if err != nil {
			return nil, fmt.Errorf("load aws config: %w", err)
		}
	}
	// A client span per S3 request ("s3 PUT"), with traceparent
	// (pkg/tracing), over the SDK's default transport or the one given.
	if httpClient == nil {
		httpClient = &http.Client{Transport: awshttp.NewBuildableClient().GetTransport()}
	}
	traced := *httpClient
	traced.Transport = tracing.Transport(httpClient.Transport, "s3")
	cfg.HTTPClient = &traced
	if !r.aws {
		cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	options := func(endpoint string) func(*s3.Options) {
		return func(o *s3.Options) {
			o.UsePathStyle = r.pathStyle
			if endpoint != "" {
				o.BaseEndpoint = aws.String(endpoint)
			}
		}
	}
	api := s3.NewFromConfig(cfg, options(r.Endpoint))
	presignAPI := api
	if r.PresignEndpoint != "" {
		presignAPI = s3.NewFromConfig(cfg, options(r.PresignEndpoint))
	}
	uploader := transfermanager.New(api, func(o *transfermanager.Options) {
		o.PartSizeBytes = PartSize
		o.MultipartUploadThreshold = PartSize
		if !r.aws {
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
	})
	return &clients{api: api, uploader: uploader, presign: s3.NewPresignClient(presignAPI)}, nil
}
