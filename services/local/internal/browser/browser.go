// Package browser starts Debian's chromium under chromedp for the operator
// page's browser tests, with the launch flags this kind of machine needs
// (headless, no sandbox, no GPU, no background traffic) and a fresh
// profile per test. Only tests import it.
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Desktop and Phone are the viewports the screenshots are taken at, in CSS
// pixels: a laptop and a phone-sized screen.
var (
	Desktop = [2]int64{1280, 860}
	Phone   = [2]int64{390, 844}
)

// ExecPath finds chromium; tests fail with a clear message without it.
func ExecPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium is not installed: run services/local/deps.sh (apt-get install -y chromium)")
}

// New returns a chromedp context of a fresh headless chromium, closed when
// the test ends. timeout bounds the whole browser session.
func New(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	path, err := ExecPath()
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.WindowSize(int(Desktop[0]), int(Desktop[1])),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// ScreenshotDir is where tests save screenshots: $SCREENSHOT_DIR when set,
// else a directory under the system temp dir, created on demand.
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "local-operator-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves a full-page PNG of the current page at the viewport
// size (w, h) under ScreenshotDir as name.png and logs the path.
func Screenshot(t *testing.T, ctx context.Context, name string, size [2]int64) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(size[0], size[1]),
		chromedp.Sleep(150*time.Millisecond), // let layout settle at the new width
	); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100 = PNG
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(ScreenshotDir(t), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
