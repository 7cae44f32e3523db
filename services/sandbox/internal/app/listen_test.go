package app

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBusyAddressLeavesNoRoot: Run listens before Build makes SANDBOX_ROOT,
// so an address it cannot take fails the start naming ADDR and leaves no
// directory behind.
func TestBusyAddressLeavesNoRoot(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	root := filepath.Join(t.TempDir(), "root")
	err = Run(context.Background(), map[string]string{
		"ADDR":            busy.Addr().String(),
		"BRAIN_TOOLS_KEY": "tools-key-0123456789",
		"SANDBOX_ROOT":    root,
	}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `listen on ADDR "`+busy.Addr().String()+`"`) {
		t.Fatalf("Run on a busy address = %v, want an error naming ADDR", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("SANDBOX_ROOT made (%v)", err)
	}
}
