package s3test

import (
	"errors"
	"net"
	"sync"
)

// Silent is an S3 endpoint that accepts TCP connections and never answers
// (a hung or SIGSTOPped server): every request waits until its caller
// gives up.
type Silent struct {
	// Endpoint is the listener's base URL, http://127.0.0.1:PORT.
	Endpoint string

	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// StartSilent listens on 127.0.0.1:0 until Close.
func StartSilent() (*Silent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Silent{Endpoint: "http://" + ln.Addr().String(), ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			// Hold the connection open, read nothing, write nothing.
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Accepted counts the connections accepted so far.
func (s *Silent) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops listening and drops every held connection.
func (s *Silent) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	return err
}
