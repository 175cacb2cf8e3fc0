package api

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Listener is the HTTP server's listener. It holds at most max connections open at once: one
// more is answered 503 (problem unavailable, with Retry-After) and closed at once, rather than
// left in the kernel's queue until a connection closes (as golang.org/x/net/netutil's
// LimitListener does), where its client would time out without knowing why. Refusals are
// counted and logged, at most a line a second.
//
// Its connections also answer headers over MaxHeaderBytes with the API's problem: net/http
// answers them itself, in plain text, before any handler runs.
type Listener struct {
	net.Listener
	max     int64
	metrics *Metrics
	log     *slog.Logger
	logs    *logLimiter

	open      atomic.Int64 // connections handed to the server and not closed yet
	lingering atomic.Int64 // refused connections still being answered
}

// NewListener limits ln to max connections open at once; m, which may be nil, counts them.
func NewListener(ln net.Listener, max int, m *Metrics, log *slog.Logger) *Listener {
	if m != nil {
		m.connsMax.Set(float64(max))
	}
	return &Listener{Listener: ln, max: int64(max), metrics: m, log: log, logs: newLogLimiter(time.Second)}
}

// Accept returns the next connection, refusing those over the limit meanwhile.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			l.metrics.connOpened()
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// A refused connection is answered, then read from until its client closes it, for at most
// refuseLinger: closing it with the request unread would reset it, and the client could lose
// the answer (net/http's closeWriteAndWait does the same). Past maxLingering refused
// connections at once, one is answered and closed at once, its answer then left to chance.
const (
	refuseLinger = 250 * time.Millisecond
	maxLingering = 64
)

func (l *Listener) refuse(c net.Conn) {
	l.metrics.connRefused()
	if ok, held := l.logs.allow("refused"); ok {
		l.log.Warn("connection refused", "max_connections", l.max, "held_back", held)
	}
	// A new connection's send buffer is empty: the write does not wait, the deadline is a
	// safeguard.
	c.SetDeadline(time.Now().Add(refuseLinger))
	answer := rawAnswer(problem("unavailable", "the server has as many connections open as it allows; retry after the Retry-After delay"), "Retry-After: 1\r\n")
	if _, err := c.Write(answer); err != nil {
		c.Close()
		return
	}
	if l.lingering.Add(1) > maxLingering {
		l.lingering.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer l.lingering.Add(-1)
		defer c.Close()
		if cw, ok := c.(closeWriter); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, MaxHeaderBytes+maxBody))
	}()
}

type closeWriter interface{ CloseWrite() error }

// conn is a connection of a Listener: it counts as open until it is closed.
type conn struct {
	net.Conn
	l      *Listener
	closed atomic.Bool
}

func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
		c.l.metrics.connClosed()
	}
	return c.Conn.Close()
}

// CloseWrite closes the sending side: net/http does so before it closes a connection whose
// client may still be sending, so that the client reads the answer rather than a reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

// plainHeadersTooLarge is net/http's own answer to headers over MaxHeaderBytes, which it writes
// on the connection in one piece before any handler runs (see net/http's conn.serve).
const plainHeadersTooLarge = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// Write writes p, except net/http's plain-text 431, which it replaces with the problem. No
// other answer can be those exact bytes: the API's answers carry X-Request-Id.
func (c *conn) Write(p []byte) (int, error) {
	if len(p) == len(plainHeadersTooLarge) && string(p) == plainHeadersTooLarge {
		if _, err := c.Conn.Write(rawAnswer(problem("headers-too-large", ""), "")); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rawAnswer is an answer written on a connection outside net/http: problem p with the extra
// header lines (each ending in CRLF) and a generated X-Request-Id, after which the connection
// is closed.
func rawAnswer(p Problem, header string) []byte {
	body, _ := json.Marshal(p)
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n%sX-Request-Id: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		p.Status, http.StatusText(p.Status), header, rand.Text(), len(body), body)
}
