package api

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/internal/requestlog"
	"github.com/labstack/echo/v4"
)

// request is what the API keeps of a request in flight: its id, its caller once
// authenticated, what its command leaves for the metrics, the cause of a 5xx answer. It is
// also the request's context, with the request's deadline: one value and one copy of the
// http.Request per request, not a context (an allocation and a copy) for each thing kept, which
// counts where a keyed retry answered from memory is a few microseconds of work in all.
//
// The deadline is that of context.WithDeadline(parent, deadline), made the first time
// anything asks for Done, Err or a value of another package: a request that never waits
// (a replay, a refused request) arms no timer and registers nothing with its connection's
// context. From the outside the two cannot be told apart.
type request struct {
	parent   context.Context
	start    time.Time // when the request reached the API
	deadline time.Time

	mu     sync.Mutex
	ctx    context.Context // context.WithDeadline(parent, deadline), once asked for
	cancel context.CancelFunc
	ended  bool

	// ID is the X-Request-Id; Principal is "" until authenticate. Every line logged with the
	// request's context carries them, through requestlog, whichever package logs it.
	requestlog.Request
	roles   access.Roles
	command string // the command's name, once the request is parsed
	outcome string // the problem code of a stored outcome that is replayed or sent
	cause   atomic.Pointer[error]
}

// requestKey is the context key of a request's own state.
type requestKey struct{}

// Deadline is the earlier of the request's and its parent's.
func (r *request) Deadline() (time.Time, bool) {
	if d, ok := r.parent.Deadline(); ok && d.Before(r.deadline) {
		return d, true
	}
	return r.deadline, true
}

func (r *request) Done() <-chan struct{} { return r.context().Done() }

func (r *request) Err() error { return r.context().Err() }

func (r *request) Value(key any) any {
	switch key {
	case requestKey{}:
		return r
	case requestlog.Key{}:
		return &r.Request
	}
	return r.context().Value(key)
}

// context is the request's deadline as a context of the standard library, made at the first
// call; canceled already if the request has ended.
func (r *request) context() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithDeadline(r.parent, r.deadline)
		if r.ended {
			r.cancel()
		}
	}
	return r.ctx
}

// end cancels the request's context, as the cancel function of context.WithDeadline does.
func (r *request) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	if r.cancel != nil {
		r.cancel()
	}
}

// requestOf returns the state of the request whose context (or a context derived from it) is
// ctx; nil outside a request.
func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// stateOf returns the state of c's request; a request that did not pass startRequests (a
// handler called on its own) gets an empty one.
func stateOf(c echo.Context) *request {
	if r := requestOf(c.Request().Context()); r != nil {
		return r
	}
	return &request{parent: context.Background()}
}

// startRequests makes every request's state its context, with a deadline (Server.
// RequestTimeout) for its work. A command runs to its end regardless, within its own bound
// (see command), so that it never stops between its effect and its recorded outcome.
//
// Every response gets an X-Request-Id: the request's own if it is 1 to maxRequestID printable
// ASCII characters, else a generated one. It becomes the correlation id of every event the
// request causes, and is in every log line of the request, so a client must not make it long
// or make it break a line.
func (s *Server) startRequests(next echo.HandlerFunc) echo.HandlerFunc {
	timeout := s.RequestTimeout
	if timeout <= 0 {
		timeout = defaultRequestTimeout
	}
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = rand.Text()
		}
		c.Response().Header()[echo.HeaderXRequestID] = []string{id}
		now := time.Now()
		r := &request{parent: req.Context(), start: now, deadline: now.Add(timeout), Request: requestlog.Request{ID: id}}
		defer r.end()
		c.SetRequest(req.WithContext(r))
		return next(c)
	}
}
