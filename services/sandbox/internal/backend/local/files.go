package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// The file operations go through os.Root, which resolves every path inside
// the workspace: a symbolic link the sandbox planted ("x -> /etc/shadow")
// cannot make the service, which runs as root, read or write outside it.

// WriteFile writes data at rel, creating parent directories, all owned by
// the workspace's uid so the sandbox can change them later. It refuses to
// push the workspace over its quota, and so refuses any write that leaves
// an over-full workspace over it (replacing a large file with a small one
// that brings it under is allowed).
func (b *Backend) WriteFile(_ context.Context, ws *workspace.Workspace, rel string, data []byte) error {
	if rel == "" {
		return fmt.Errorf("write %s: %w", backend.WorkspaceMount, backend.ErrIsDir)
	}
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	var old int64 // the blocks the file being replaced holds
	if fi, err := root.Stat(rel); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("write %s: %w", rel, backend.ErrIsDir)
		}
		old = allocated(fi)
	}
	if b.cfg.Quota > 0 {
		used, err := workspace.Usage(ws.Dir)
		if err != nil {
			return fmt.Errorf("write %s: %w: %w", rel, backend.ErrQuota, err)
		}
		// Usage counts allocated blocks, so the new file counts as the
		// blocks its bytes fill.
		need := (int64(len(data)) + fsBlock - 1) / fsBlock * fsBlock
		if used-old+need > b.cfg.Quota {
			if used > b.cfg.Quota {
				return fmt.Errorf("write %s: %w: the workspace already uses %s, over its quota of %s; delete at least %s of files (rm in sandbox_exec) first", rel, backend.ErrQuota, backend.Bytes(used), backend.Bytes(b.cfg.Quota), backend.Bytes(used-b.cfg.Quota))
			}
			return fmt.Errorf("write %s: %w: the workspace uses %s of its quota of %s, and this file would add %s", rel, backend.ErrQuota, backend.Bytes(used), backend.Bytes(b.cfg.Quota), backend.Bytes(need-old))
		}
	}
	// The workspace changes from here on, so its last measurement no
	// longer holds (forgotten again at the end, in case a command's
	// measurement raced with the write).
	b.wrote(ws)
	defer b.wrote(ws)
	if err := b.mkdirs(root, ws, path.Dir(rel)); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	// O_NONBLOCK: opening a FIFO the sandbox made must not hang us.
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, mapErr(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("write %s: not a regular file", rel)
	}
	if ws.UID >= 0 && b.asRoot {
		if err := f.Chown(ws.UID, ws.GID); err != nil {
			return fmt.Errorf("write %s: %w", rel, err)
		}
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// fsBlock is the allocation unit WriteFile assumes for the quota: ext4's
// and XFS's usual block size.
const fsBlock = 4096

// allocated returns the bytes of disk blocks fi's file holds.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// mkdirs creates dir and its parents inside root, giving each new one to
// the workspace's uid.
func (b *Backend) mkdirs(root *os.Root, ws *workspace.Workspace, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			fi, err := root.Stat(p)
			if err != nil {
				return mapErr(err)
			}
			if !fi.IsDir() {
				return fmt.Errorf("%s: %w", p, backend.ErrNotDir)
			}
			continue
		}
		if err != nil {
			return mapErr(err)
		}
		if ws.UID >= 0 && b.asRoot {
			if err := root.Lchown(p, ws.UID, ws.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadFile reads up to limit bytes of rel from offset.
func (b *Backend) ReadFile(_ context.Context, ws *workspace.Workspace, rel string, offset, limit int64) ([]byte, int64, error) {
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, 0, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	name := rel
	if name == "" {
		name = "."
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, mapErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("read %s: %w", rel, backend.ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("read %s: not a regular file (%s)", rel, fi.Mode().Type())
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", rel, err)
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, fi.Size(), nil
}

// ListFiles lists rel down to depth levels, without following symbolic
// links.
func (b *Backend) ListFiles(_ context.Context, ws *workspace.Workspace, rel string, depth, limit int) ([]backend.FileInfo, bool, error) {
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, false, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	start := rel
	if start == "" {
		start = "."
	}
	fi, err := root.Stat(start)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", rel, mapErr(err))
	}
	if !fi.IsDir() {
		return nil, false, fmt.Errorf("list %s: %w", rel, backend.ErrNotDir)
	}
	var entries []backend.FileInfo
	// Walk one more than limit so that truncation is known, and stop there:
	// a workspace can hold millions of files.
	errEnough := errors.New("enough")
	err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start {
				return err
			}
			return nil // vanished or unreadable: skip it
		}
		if p == start {
			return nil
		}
		relp := strings.TrimPrefix(strings.TrimPrefix(p, start), "/")
		if start == "." {
			relp = p
		}
		level := strings.Count(relp, "/") + 1
		info, err := d.Info()
		if err != nil {
			return nil
		}
		entries = append(entries, fileInfo(relp, info))
		if len(entries) > limit {
			return errEnough
		}
		if d.IsDir() && level >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return nil, false, fmt.Errorf("list %s: %w", rel, mapErr(err))
	}
	// A truncated listing holds the first entries in walk order (each
	// directory's names in lexical order), sorted.
	out, truncated := backend.SortAndCap(entries, limit)
	return out, truncated, nil
}

func fileInfo(p string, fi fs.FileInfo) backend.FileInfo {
	typ := "other"
	switch {
	case fi.Mode().IsRegular():
		typ = "file"
	case fi.IsDir():
		typ = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		typ = "symlink"
	}
	size := int64(0)
	if typ == "file" {
		size = fi.Size()
	}
	return backend.FileInfo{Path: p, Type: typ, Size: size, Mode: backend.ModeString(fi.Mode()), ModTime: fi.ModTime().UTC()}
}
