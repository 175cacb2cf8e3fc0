// Package natstest runs a NATS server with JetStream in the test's process, from the server's
// own module: the broker's tests and the end-to-end tests need nothing installed.
package natstest

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a NATS server with JetStream on a port of its own, its store in a temporary
// directory; Stop and Start keep both.
type Server struct {
	opts *server.Options
	srv  *server.Server
}

// Start starts a server that tb's cleanup stops.
func Start(tb testing.TB) *Server {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{opts: &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: tb.TempDir(), NoLog: true, NoSigs: true}}
	s.Start(tb)
	tb.Cleanup(s.Stop)
	return s
}

// URL is the server's client URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.opts.Port) }

// Start starts the server again after Stop, on its port and store.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	srv, err := server.NewServer(s.opts)
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		tb.Fatal("nats-server did not start")
	}
	s.srv = srv
}

// Stop stops the server and waits until it has.
func (s *Server) Stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}
