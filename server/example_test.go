package server_test

import (
	"context"
	"errors"
	"log"
	"net"
	"os"
	"os/signal"
	"time"

	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
)

// A server that answers each connection's first request, stopped
// gracefully on Ctrl-C: connections in flight get 30 s to finish.
func Example() {
	cfg := &tls13.Config{ /* Certificates: ... */ }
	srv, err := server.New(server.Config{
		TLS:              func() *tls13.Config { return cfg },
		HandshakeTimeout: 10 * time.Second,
		Limits:           server.Limits{Max: 4096, PerSource: 256},
		Handler: func(c *server.Conn) {
			if c.FinishHandshake() != nil {
				return
			}
			buf := make([]byte, 4096)
			if n, _ := c.Read(buf); n > 0 {
				c.Write([]byte("hello\n"))
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:8443")
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		drain, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		srv.Shutdown(drain)
	}()
	if err := srv.Serve(ln); !errors.Is(err, server.ErrServerClosed) {
		log.Fatal(err)
	}
}
