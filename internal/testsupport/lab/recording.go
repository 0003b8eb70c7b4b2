package lab

import (
	"io"
	"net"
	"strconv"
	"sync"
)

// RecordingPath is a TCP path on 127.0.0.2 at the world's port: it relays
// each connection to the server and keeps the bytes the client sent on
// it, so a test can look into a first flight as it crossed the wire, or
// replay it. A client reaches it by dialling 127.0.0.2 (dial.Options.Addrs).
type RecordingPath struct {
	ln    net.Listener
	mu    sync.Mutex
	conns [][]byte
}

// StartRecordingPath listens on 127.0.0.2 at the world's port until
// Close. An error means 127.0.0.2 is not usable here.
func (w *World) StartRecordingPath() (*RecordingPath, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(w.Port)))
	if err != nil {
		return nil, err
	}
	p := &RecordingPath{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			i := len(p.conns)
			p.conns = append(p.conns, nil)
			p.mu.Unlock()
			go p.relay(c, w.ServerAddr, i)
		}
	}()
	return p, nil
}

// Close stops accepting; relayed connections end with their peers.
func (p *RecordingPath) Close() error { return p.ln.Close() }

// ClientBytes returns a copy of what the client sent on connection i, in
// the order connections arrived (nil: no such connection).
func (p *RecordingPath) ClientBytes(i int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.conns) {
		return nil
	}
	return append([]byte(nil), p.conns[i]...)
}

func (p *RecordingPath) relay(c net.Conn, addr string, i int) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(c, s); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.conns[i] = append(p.conns[i], buf[:n]...)
			p.mu.Unlock()
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			s.(*net.TCPConn).CloseWrite()
			return
		}
	}
}
