// Command hello is the program servicetest's own tests start: it serves
// GET /healthz on ADDR, says where, and exits 3 on SIGTERM.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ln, err := net.Listen("tcp", os.Getenv("ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("hello listening on %s, GREETING=%q, HOSTNAME=%q\n", ln.Addr(), os.Getenv("GREETING"), os.Getenv("HOSTNAME"))
	go func() { _ = http.Serve(ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	os.Exit(3)
}
