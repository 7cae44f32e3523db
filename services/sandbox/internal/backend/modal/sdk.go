package modal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
)

// sdkClient adapts Modal's Go SDK to Client. It is not covered by tests:
// Modal cannot be reached from here.
type sdkClient struct {
	c       *modalsdk.Client
	cfg     Config
	app     *modalsdk.App
	image   *modalsdk.Image
	network bool
}

// NewFromConfig builds a backend over Modal's SDK: credentials from cfg
// (or the SDK's own profile, ~/.modal.toml, when unset), the app looked up
// or created. It fails when the SDK cannot start or the app cannot be
// reached.
func NewFromConfig(ctx context.Context, cfg Config, idle time.Duration, logger *slog.Logger) (*Backend, error) {
	if (cfg.TokenID == "") != (cfg.TokenSecret == "") {
		return nil, errors.New("modal backend: set both MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, or neither to use the Modal profile")
	}
	c, err := modalsdk.NewClientWithOptions(&modalsdk.ClientParams{TokenID: cfg.TokenID, TokenSecret: cfg.TokenSecret, Environment: cfg.Environment, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("modal backend: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	app, err := c.Apps.FromName(cctx, cfg.App, &modalsdk.AppFromNameParams{Environment: cfg.Environment, CreateIfMissing: true})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("modal backend: app %q: %w", cfg.App, err)
	}
	sc := &sdkClient{c: c, cfg: cfg, app: app, image: c.Images.FromRegistry(cfg.Image, nil), network: cfg.AllowInternet}
	return New(sc, cfg.Workdir, idle, logger)
}

func (s *sdkClient) CreateSandbox(ctx context.Context, workdir string, lifetime time.Duration, tags map[string]string) (Sandbox, error) {
	sb, err := s.c.Sandboxes.Create(ctx, s.app, s.image, &modalsdk.SandboxCreateParams{
		Timeout:      lifetime,
		Workdir:      workdir,
		BlockNetwork: !s.network,
		Tags:         tags,
		// Keep the sandbox up between commands.
		Command: []string{"sleep", "infinity"},
	})
	if err != nil {
		return nil, err
	}
	// The workspace directory: the image may not have it.
	if err := sb.Filesystem.MakeDirectory(ctx, workdir, nil); err != nil {
		_, _ = sb.Terminate(context.WithoutCancel(ctx), nil)
		return nil, fmt.Errorf("make %s: %w", workdir, err)
	}
	return &sdkSandbox{sb: sb}, nil
}

type sdkSandbox struct{ sb *modalsdk.Sandbox }

func (s *sdkSandbox) ID() string { return s.sb.SandboxID }

func (s *sdkSandbox) Exec(ctx context.Context, argv []string, dir string, env map[string]string, timeout time.Duration) (Process, error) {
	cp, err := s.sb.Exec(ctx, argv, &modalsdk.SandboxExecParams{Workdir: dir, Env: env, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return sdkProcess{cp}, nil
}

func fsErr(err error) error {
	var nf modalsdk.SandboxFilesystemNotFoundError
	var nd modalsdk.SandboxFilesystemNotADirectoryError
	var id modalsdk.SandboxFilesystemIsADirectoryError
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%w (%v)", backend.ErrNotFound, err)
	case errors.As(err, &nd):
		return fmt.Errorf("%w (%v)", backend.ErrNotDir, err)
	case errors.As(err, &id):
		return fmt.Errorf("%w (%v)", backend.ErrIsDir, err)
	}
	return err
}

func fileOf(fi modalsdk.FileInfo) File {
	sec, frac := math.Modf(fi.ModifiedTime)
	return File{
		Name: fi.Name, Dir: fi.Type == modalsdk.FileTypeDirectory, Symlink: fi.Type == modalsdk.FileTypeSymlink,
		Size: fi.Size, Mode: fi.Mode, ModTime: time.Unix(int64(sec), int64(frac*1e9)),
	}
}

func (s *sdkSandbox) Stat(ctx context.Context, p string) (File, error) {
	fi, err := s.sb.Filesystem.Stat(ctx, p, nil)
	if err != nil {
		return File{}, fsErr(err)
	}
	return fileOf(*fi), nil
}

func (s *sdkSandbox) ReadFile(ctx context.Context, p string) ([]byte, error) {
	data, err := s.sb.Filesystem.ReadBytes(ctx, p, nil)
	return data, fsErr(err)
}

func (s *sdkSandbox) WriteFile(ctx context.Context, p string, data []byte) error {
	return fsErr(s.sb.Filesystem.WriteBytes(ctx, data, p, nil))
}

func (s *sdkSandbox) ListDir(ctx context.Context, p string) ([]File, error) {
	list, err := s.sb.Filesystem.ListFiles(ctx, p, nil)
	if err != nil {
		return nil, fsErr(err)
	}
	out := make([]File, 0, len(list))
	for _, fi := range list {
		out = append(out, fileOf(fi))
	}
	return out, nil
}

func (s *sdkSandbox) Terminate(ctx context.Context) error {
	_, err := s.sb.Terminate(ctx, nil)
	return err
}

type sdkProcess struct{ cp *modalsdk.ContainerProcess }

func (p sdkProcess) Stdin() io.WriteCloser { return p.cp.Stdin }
func (p sdkProcess) Stdout() io.Reader     { return p.cp.Stdout }
func (p sdkProcess) Stderr() io.Reader     { return p.cp.Stderr }
func (p sdkProcess) Wait(ctx context.Context) (int, error) {
	return p.cp.Wait(ctx, nil)
}
