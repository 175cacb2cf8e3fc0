package api

import (
	"bytes"
	"context"
	"net/http"

	"github.com/acme/orders/access"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/labstack/echo/v4"
)

// dispatchKey is the context key under which Dispatch hands authenticate its caller. Only this
// package can make one, and a request from the network gets its context from net/http: no HTTP
// client can name a caller this way.
type dispatchKey struct{}

// errNotServing answers a dispatch before Handler made the handlers.
var errNotServing = fault.New(fault.Unavailable, "", "the server does not serve yet")

// dispatchedCaller is the caller that Dispatch set on c's request, if Dispatch sent it.
func dispatchedCaller(c echo.Context) (access.Caller, bool) {
	caller, ok := stateOf(c).parent.Value(dispatchKey{}).(access.Caller)
	return caller, ok
}

// Dispatch runs a command request in process through the server's own handlers, as if it came
// over HTTP from caller, whom the intake that calls it has authenticated in its own way (a
// message broker's authorization): the same routes, parsing, keyed pipeline and answers,
// byte for byte. It returns once the answer is final and, for a command, its outcome durable.
// path is escaped as in a URL. Dispatch needs an Idempotency-Key in header on every method:
// without one it answers 400 idempotency-key-missing, as a POST without one is answered.
func (s *Server) Dispatch(ctx context.Context, caller access.Caller, method, path string, header http.Header, body []byte) (int, http.Header, []byte) {
	h := s.dispatcher.Load()
	if h == nil {
		return answer(problemOutcome(errNotServing))
	}
	ctx = context.WithValue(ctx, dispatchKey{}, caller)
	req, err := http.NewRequestWithContext(ctx, method, "http://dispatch"+path, bytes.NewReader(body))
	if err != nil {
		return answer(problemOutcome(errNotFound))
	}
	req.Header = header.Clone()
	req.Header.Del("Authorization")
	if len(req.Header.Values("Idempotency-Key")) == 0 {
		return answer(problemOutcome(idempotency.ErrKeyMissing))
	}
	w := &recorder{header: http.Header{}}
	h.ServeHTTP(w, req)
	return w.status, w.header, w.body.Bytes()
}

// answer is an outcome as Dispatch returns it.
func answer(out idempotency.Outcome) (int, http.Header, []byte) {
	h := http.Header{}
	for k, v := range out.Headers {
		h.Set(k, v)
	}
	return out.Status, h, []byte(out.Body)
}

// recorder keeps the answer of a dispatched request.
type recorder struct {
	status int
	header http.Header
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
