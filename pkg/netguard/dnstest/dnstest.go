// Package dnstest runs a tiny DNS server on 127.0.0.1 for tests, so that a
// host name can resolve to any address (private, public, a mix of both)
// without a packet leaving the machine. Answers come from a fixed table;
// any other name gets NXDOMAIN.
package dnstest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/net/dns/dnsmessage"
)

// Server answers A and AAAA queries from Records (keys are lower-case names
// without the trailing dot).
type Server struct {
	conn    net.PacketConn
	records map[string][]netip.Addr
	queries atomic.Int64
	wg      sync.WaitGroup
}

// Start serves records on a UDP port of 127.0.0.1 until Close.
func Start(records map[string][]netip.Addr) (*Server, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{conn: conn, records: make(map[string][]netip.Addr, len(records))}
	for k, v := range records {
		s.records[strings.ToLower(strings.TrimSuffix(k, "."))] = v
	}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Addr is the server's UDP address.
func (s *Server) Addr() string { return s.conn.LocalAddr().String() }

// Queries counts the questions answered so far.
func (s *Server) Queries() int64 { return s.queries.Load() }

// Resolver returns a pure-Go resolver that sends every query to s.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", s.Addr())
		},
	}
}

// Close stops the server.
func (s *Server) Close() error {
	err := s.conn.Close()
	s.wg.Wait()
	return err
}

func (s *Server) serve() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if out, ok := s.answer(buf[:n]); ok {
			_, _ = s.conn.WriteTo(out, from)
		}
	}
}

func (s *Server) answer(req []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	s.queries.Add(1)
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	addrs, known := s.records[name]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, false
	}
	if err := b.Question(q); err != nil {
		return nil, false
	}
	if err := b.StartAnswers(); err != nil {
		return nil, false
	}
	for _, a := range addrs {
		rrh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			if err := b.AResource(rrh, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil, false
			}
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			if err := b.AAAAResource(rrh, dnsmessage.AAAAResource{AAAA: a.As16()}); err != nil {
				return nil, false
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, false
	}
	return out, true
}
