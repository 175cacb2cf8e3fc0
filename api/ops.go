package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
	"github.com/labstack/echo/v4"
)

// requestInfo is what the logs of a request's idempotency key need to know of the request.
type requestInfo struct{ id, principal string }

type requestInfoKey struct{}

// withRequestInfo puts the request id and the principal into the request's context, where
// ObserveKey finds them.
func withRequestInfo(c echo.Context) {
	req := c.Request()
	info := &requestInfo{id: requestID(c), principal: principal(c)}
	c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestInfoKey{}, info)))
}

// ObserveKey logs a step in the life of an idempotency key and counts it: give it to
// idempotency.Keys.Observe. The log line names the key by its hash, never by itself, with the
// request id and principal when ctx is a request's; grep the hash to follow the key.
func (s *Server) ObserveKey(ctx context.Context, e idempotency.Event, keyHash string) {
	if s.Metrics != nil {
		s.Metrics.keys.WithLabelValues(string(e)).Inc()
	}
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		s.Log.LogAttrs(ctx, slog.LevelInfo, "idempotency key", slog.String("event", string(e)), slog.String("key_hash", keyHash),
			slog.String("request_id", info.id), slog.String("principal", info.principal))
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, "idempotency key", slog.String("event", string(e)), slog.String("key_hash", keyHash))
}

// defaultRequestTimeout bounds a request's work when Server.RequestTimeout is 0.
const defaultRequestTimeout = 30 * time.Second

// limitTime gives every request a deadline. A command runs to its end regardless, within its
// own bound (see command), so that it never stops between its effect and its recorded outcome.
func (s *Server) limitTime(next echo.HandlerFunc) echo.HandlerFunc {
	timeout := s.RequestTimeout
	if timeout <= 0 {
		timeout = defaultRequestTimeout
	}
	return func(c echo.Context) error {
		req := c.Request()
		ctx, cancel := context.WithTimeout(req.Context(), timeout)
		defer cancel()
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// readinessTimeout bounds a readiness check.
const readinessTimeout = 2 * time.Second

// Readiness is the check for Server.Ready of a service on store and the projections of r: not
// ready while the store does not answer a read or the log's head, or a projection has failed.
func Readiness(store eventstore.Store, r *projections.Runner) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
		defer cancel()
		for _, err := range store.ReadStream(ctx, "readiness-probe", eventstore.ReadStreamOptions{Limit: 1}) {
			if err != nil && !errors.Is(err, eventstore.ErrStreamNotFound) {
				return fmt.Errorf("event store: %w", err)
			}
			break
		}
		st, err := r.Status(ctx)
		if err != nil {
			return fmt.Errorf("event store: %w", err)
		}
		for _, p := range st {
			if p.State == projections.StateFailed {
				return fmt.Errorf("projection %s failed: %s", p.Name, p.Error)
			}
		}
		return nil
	}
}
