// Command fileserver serves a directory over HTTP on a loopback address:
// the demo uses it to give web_fetch real pages that nobody here wrote
// ($(go env GOROOT)/doc).
//
//	fileserver -addr 127.0.0.1:8090 -dir "$(go env GOROOT)/doc"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/brain-tools/suite/pkg/version"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address (host:port)")
	dir := flag.String("dir", ".", "directory to serve")
	showVersion := flag.Bool("version", false, version.FlagUsage)
	flag.Parse()
	if *showVersion {
		_ = version.Print(os.Stdout, "fileserver")
		return
	}
	if err := run(*addr, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "fileserver:", err)
		os.Exit(1)
	}
}

func run(addr, dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("serve %s: not a directory", dir)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "fileserver: serving %s on http://%s\n", dir, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
