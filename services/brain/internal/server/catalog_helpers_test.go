package server

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/netguard"
)

// loopbackGuard is the SSRF guard with the operator's allow-list for
// loopback, so that tenants' urls may name the test's servers on
// 127.0.0.1. A Guard is safe for concurrent use: every brain shares it.
var loopbackGuard = netguard.New(netguard.Options{AnyPort: true, AllowPrefixes: []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})

// allowLoopback gives brain loopbackGuard; it is the one option replicas
// (BRAIN_TEST_STORE=replicas) are started with too.
func allowLoopback(o *Options) { o.Guard = loopbackGuard }

// sameStore starts a brain on b's store (its data dir, or its database):
// the next brain after a restart.
func sameStore(b *brain) func(*Options) {
	return func(o *Options) { o.DataDir, o.DatabaseURL = b.dir, b.dbURL }
}

// storeDump is all the store keeps: the SQLite files, or a plain pg_dump
// of the PostgreSQL database.
func (b *brain) storeDump() []byte {
	b.t.Helper()
	if b.dbURL != "" {
		out, err := pg.Run("pg_dump", "--format=plain", "--data-only", "--dbname="+b.dbURL)
		if err != nil {
			b.t.Fatal(err)
		}
		return []byte(out)
	}
	var all []byte
	for _, name := range []string{"brain.db", "brain.db-wal"} {
		data, err := os.ReadFile(filepath.Join(b.dir, name))
		if err != nil && name == "brain.db" {
			b.t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}

// with is b for a subtest: its failures end t, not the parent.
func (b *brain) with(t *testing.T) *brain {
	cp := *b
	cp.t = t
	return &cp
}

// created posts body to path as tenant and decodes the 201 into v.
func (b *brain) created(path, tenant string, body, v any) {
	b.t.Helper()
	r := b.do("POST", path, tenant, body)
	if r.status != http.StatusCreated {
		b.t.Fatalf("POST %s: %d %s", path, r.status, r.body)
	}
	r.json(b.t, v)
}

// ok sends method path as tenant and decodes the 200 into v (v may be nil).
func (b *brain) ok(method, path, tenant string, body, v any) {
	b.t.Helper()
	r := b.do(method, path, tenant, body)
	if r.status != http.StatusOK {
		b.t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
	}
	if v != nil {
		r.json(b.t, v)
	}
}

// secretTool stores the tools key as tenant's secret "tools" and makes a
// custom tool name calling the test tool server's tool remote with it.
func (b *brain) secretTool(tenant, name, remote string, extra map[string]any) CustomToolJSON {
	b.t.Helper()
	if r := b.do("PUT", "/secrets/tools", tenant, map[string]any{"value": toolsKey}); r.status != http.StatusCreated && r.status != http.StatusOK {
		b.t.Fatalf("put secret: %d %s", r.status, r.body)
	}
	body := map[string]any{"name": name, "description": name + " custom tool", "url": b.tools.URL + "/tools/" + remote,
		"auth_secret_name": "tools", "input_schema": map[string]any{"type": "object"}}
	for k, v := range extra {
		body[k] = v
	}
	var ct CustomToolJSON
	b.created("/custom_tools", tenant, body, &ct)
	return ct
}

// waitCall waits up to 5 s for call id to finish and returns it.
func (b *brain) waitCall(tenant, id string) CallJSON {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var c CallJSON
		b.do("GET", "/tool_calls/"+id+"?wait_seconds=1", tenant, nil).json(b.t, &c)
		if c.FinishedAt != nil || time.Now().After(deadline) {
			return c
		}
	}
}

// countingListener counts the connections it accepts: a listener the
// guard keeps brain away from must see none.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// listen serves h on a counting listener at addr ("127.0.0.1:0", "[::1]:0").
func listen(t *testing.T, addr string, h http.Handler) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen %s: %v (needs %s on this machine)", addr, err, addr)
	}
	cl := &countingListener{Listener: ln}
	hs := &http.Server{Handler: h}
	go hs.Serve(cl)
	t.Cleanup(func() { hs.Close() })
	return cl
}
