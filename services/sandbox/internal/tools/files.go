package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
)

const pathDescription = "Path in the workspace: relative to it (src/main.go) or absolute under /workspace."

type writeArgs struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	// Workspace is the handle of MCP clients without a session (scope.go).
	Workspace *string `json:"workspace,omitempty"`
}

func (s *Service) writeFileTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:  "sandbox_write_file",
		Title: "Write a file",
		// It replaces a file of the session's own workspace: destructive,
		// and the same write twice leaves the same file.
		Annotations: &tool.Annotations{IdempotentHint: true, OpenWorldHint: new(bool)},
		Description: "Write a file in this session's sandbox workspace, creating parent directories and replacing an existing file. Commands of the session see it at once.",
		InputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":     map[string]any{"type": "string", "minLength": 1, "maxLength": 4096, "description": pathDescription},
				"content":  map[string]any{"type": "string", "description": fmt.Sprintf("The file's content, at most %d bytes once decoded.", s.lim.MaxWriteBytes)},
				"encoding": map[string]any{"enum": []string{"utf-8", "base64"}, "description": "How content is given: utf-8 text (default) or base64 for binary data."},
			},
			"required":             []string{"path", "content"},
			"additionalProperties": false,
		}),
		OutputSchema: mustJSON(map[string]any{
			"type":       "object",
			"properties": map[string]any{"path": map[string]any{"type": "string"}, "bytes": map[string]any{"type": "integer"}},
			"required":   []string{"path", "bytes"},
		}),
		TimeoutSeconds: 60,
	}, handle, func(ctx context.Context, call *service.Call, args writeArgs) (*tool.Result, error) {
		rel, err := backend.CleanPath(args.Path)
		if err != nil {
			return fieldErr("path", "%v", err), nil
		}
		if rel == "" {
			return fieldErr("path", "names the workspace itself; give a file path"), nil
		}
		var data []byte
		switch args.Encoding {
		case "", "utf-8":
			data = []byte(args.Content)
		case "base64": // the schema allows no other
			data, err = base64.StdEncoding.DecodeString(args.Content)
			if err != nil {
				return fieldErr("content", "not valid base64: %v", err), nil
			}
		}
		if len(data) > s.lim.MaxWriteBytes {
			return fieldErr("content", "%d bytes is over the limit of %d", len(data), s.lim.MaxWriteBytes), nil
		}
		ws, release, bad := s.acquire(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		defer release()
		if err := s.be.WriteFile(ctx, ws, rel, data); err != nil {
			return fileError("sandbox_write_file", err, call), nil
		}
		shown := backend.WorkspaceMount + "/" + rel
		return mustResult(tool.StructuredResult(map[string]any{"path": shown, "bytes": len(data)}, fmt.Sprintf("wrote %d bytes to %s", len(data), shown))), nil
	})

}

type readArgs struct {
	Path      string  `json:"path"`
	Offset    *int64  `json:"offset,omitempty"`
	MaxBytes  *int    `json:"max_bytes,omitempty"`
	Workspace *string `json:"workspace,omitempty"`
}

func (s *Service) readFileTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:        "sandbox_read_file",
		Title:       "Read a file",
		Annotations: tool.ReadOnly(),
		Description: "Read a file of this session's sandbox workspace: UTF-8 text as it is, anything else as base64. " +
			fmt.Sprintf("Reads at most max_bytes (default %d, at most %d) from offset; read on from offset+bytes when truncated is true.", s.lim.DefaultReadBytes, s.lim.MaxReadBytes),
		InputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":      map[string]any{"type": "string", "minLength": 1, "maxLength": 4096, "description": pathDescription},
				"offset":    map[string]any{"type": "integer", "minimum": 0, "description": "Byte offset to start at. Default 0."},
				"max_bytes": map[string]any{"type": "integer", "minimum": 1, "maximum": s.lim.MaxReadBytes},
			},
			"required":             []string{"path"},
			"additionalProperties": false,
		}),
		OutputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{"type": "string"}, "size": map[string]any{"type": "integer"},
				"offset": map[string]any{"type": "integer"}, "bytes": map[string]any{"type": "integer"},
				"encoding": map[string]any{"enum": []string{"utf-8", "base64"}}, "content": map[string]any{"type": "string"},
				"truncated": map[string]any{"type": "boolean"},
			},
			"required": []string{"path", "offset", "bytes", "encoding", "content", "truncated"},
		}),
		TimeoutSeconds: 60,
	}, handle, func(ctx context.Context, call *service.Call, args readArgs) (*tool.Result, error) {
		rel, err := backend.CleanPath(args.Path)
		if err != nil {
			return fieldErr("path", "%v", err), nil
		}
		// The schema holds offset to 0 or more and max_bytes to its range.
		offset := int64(0)
		if args.Offset != nil {
			offset = *args.Offset
		}
		limit := s.lim.DefaultReadBytes
		if args.MaxBytes != nil {
			limit = *args.MaxBytes
		}
		ws, release, bad := s.acquire(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		defer release()
		// One byte more tells whether the file goes on.
		data, size, err := s.be.ReadFile(ctx, ws, rel, offset, int64(limit)+1)
		if err != nil {
			return fileError("sandbox_read_file", err, call), nil
		}
		truncated := len(data) > limit
		if truncated {
			data = data[:limit]
		}
		encoding, content := "utf-8", ""
		if text, ok := asText(data, truncated); ok {
			content = text
			if truncated {
				// Do not end inside a character: the next read starts
				// at the character.
				data = data[:len(text)]
			}
		} else {
			encoding, content = "base64", base64.StdEncoding.EncodeToString(data)
		}
		shown := backend.WorkspaceMount + "/" + rel
		m := map[string]any{"path": shown, "offset": offset, "bytes": len(data), "encoding": encoding, "content": content, "truncated": truncated}
		if size >= 0 {
			m["size"] = size
		}
		head := fmt.Sprintf("%s: %d bytes from offset %d", shown, len(data), offset)
		if size >= 0 {
			head += fmt.Sprintf(" of %d", size)
		}
		if truncated {
			head += fmt.Sprintf(" (more from offset %d)", offset+int64(len(data)))
		}
		if encoding == "base64" {
			head += ", base64"
		}
		return mustResult(tool.StructuredResult(m, head+"\n"+content)), nil
	})

}

// asText returns data as text when it is UTF-8 with few control
// characters (a binary file is base64 instead). A read cut short may end
// inside a character; that tail is left for the next read.
func asText(data []byte, cut bool) (string, bool) {
	if cut {
		for i := 1; i <= 3 && i <= len(data); i++ {
			if utf8.RuneStart(data[len(data)-i]) {
				if !utf8.FullRune(data[len(data)-i:]) {
					data = data[:len(data)-i]
				}
				break
			}
		}
	}
	if !utf8.Valid(data) {
		return "", false
	}
	control := 0
	for _, c := range data {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != 0x1b && c != '\f' {
			control++
		}
	}
	if control > len(data)/100 {
		return "", false
	}
	return string(data), true
}

type listArgs struct {
	Path       string  `json:"path,omitempty"`
	Depth      *int    `json:"depth,omitempty"`
	MaxEntries *int    `json:"max_entries,omitempty"`
	Workspace  *string `json:"workspace,omitempty"`
}

func (s *Service) listFilesTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:        "sandbox_list_files",
		Title:       "List files",
		Annotations: tool.ReadOnly(),
		Description: "List a directory of this session's sandbox workspace (default: the workspace itself), depth levels down, with each entry's type, size, mode and modification time. Symbolic links are listed, not followed.",
		InputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":        map[string]any{"type": "string", "maxLength": 4096, "description": pathDescription + " Default: the workspace."},
				"depth":       map[string]any{"type": "integer", "minimum": 1, "maximum": s.lim.MaxListDepth, "description": "Levels to descend; 1 (default) lists the directory's own entries."},
				"max_entries": map[string]any{"type": "integer", "minimum": 1, "maximum": s.lim.MaxListEntries, "description": fmt.Sprintf("Most entries to return. Default %d.", s.lim.DefaultListEntries)},
			},
			"additionalProperties": false,
		}),
		OutputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":      map[string]any{"type": "string"},
				"entries":   map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				"truncated": map[string]any{"type": "boolean"},
			},
			"required": []string{"path", "entries", "truncated"},
		}),
		TimeoutSeconds: 60,
	}, handle, func(ctx context.Context, call *service.Call, args listArgs) (*tool.Result, error) {
		rel, err := backend.CleanPath(args.Path)
		if err != nil {
			return fieldErr("path", "%v", err), nil
		}
		// The schema holds depth and max_entries to their ranges.
		depth, limit := 1, s.lim.DefaultListEntries
		if args.Depth != nil {
			depth = *args.Depth
		}
		if args.MaxEntries != nil {
			limit = *args.MaxEntries
		}
		ws, release, bad := s.acquire(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		defer release()
		entries, truncated, err := s.be.ListFiles(ctx, ws, rel, depth, limit)
		if err != nil {
			return fileError("sandbox_list_files", err, call), nil
		}
		if entries == nil {
			entries = []backend.FileInfo{}
		}
		shown := backend.WorkspaceMount
		if rel != "" {
			shown += "/" + rel
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d entries", shown, len(entries))
		if truncated {
			b.WriteString(" (truncated; raise max_entries or list a subdirectory)")
		}
		for _, e := range entries {
			name := e.Path
			if e.Type == "dir" {
				name += "/"
			}
			fmt.Fprintf(&b, "\n%-7s %10d  %s", e.Type, e.Size, name)
		}
		return mustResult(tool.StructuredResult(map[string]any{"path": shown, "entries": entries, "truncated": truncated}, b.String())), nil
	})

}
