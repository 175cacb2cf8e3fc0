// Package requestlog names the request a line was logged for: a slog handler that adds the id
// and principal of the request in a record's context to the record, whichever package logs it,
// and the steps its idempotency key took in the request, which ride on its lines instead of
// lines of their own.
// The intake that serves the request (the API) puts a *Request in its context; the packages it
// calls only log with that context, and know nothing of the intake.
package requestlog

import (
	"context"
	"log/slog"
)

// Request is what the log lines of a request carry.
type Request struct {
	ID        string // logged as request_id
	Principal string // logged as principal; "" until the caller is known
	// KeyHash and KeySteps are, once the request's idempotency key took a step, the key's hash
	// (logged as key_hash) and its steps in this request, in order, space-separated (logged as
	// key). Set by the goroutine that serves the request, as Principal is.
	KeyHash, KeySteps string
}

// Step notes that the request's key, of hash hash, took step.
func (r *Request) Step(hash, step string) {
	r.KeyHash = hash
	if r.KeySteps == "" {
		r.KeySteps = step
		return
	}
	r.KeySteps += " " + step
}

// Key is the context key of a *Request. A context that is a request's own state may answer
// Value(Key{}) itself instead of wrapping it with context.WithValue, saving an allocation.
type Key struct{}

// FromContext returns the request ctx carries, if any.
func FromContext(ctx context.Context) *Request {
	r, _ := ctx.Value(Key{}).(*Request)
	return r
}

// Logger returns log, whose records logged with a request's context carry the request's id and
// principal; log itself if its handler adds them already.
func Logger(log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(handler); ok {
		return log
	}
	return slog.New(handler{log.Handler()})
}

// handler adds the request's id and principal to the records logged with its context.
type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	if r := FromContext(ctx); r != nil {
		rec.AddAttrs(slog.String("request_id", r.ID), slog.String("principal", r.Principal))
		if r.KeyHash != "" {
			rec.AddAttrs(slog.String("key_hash", r.KeyHash), slog.String("key", r.KeySteps))
		}
	}
	return h.Handler.Handle(ctx, rec)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}
