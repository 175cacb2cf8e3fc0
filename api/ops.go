package api

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
)

// ObserveKey logs a step in the life of an idempotency key and counts it: give it to
// idempotency.Keys.Observe. The log line names the key by its hash, never by itself, with the
// request id and principal when ctx is a request's; grep the hash to follow the key.
func (s *Server) ObserveKey(ctx context.Context, e idempotency.Event, keyHash string) {
	if s.Metrics != nil {
		s.Metrics.keySeries(e).Inc()
	}
	if r := requestOf(ctx); r != nil && r.principal != "" {
		s.Log.LogAttrs(ctx, slog.LevelInfo, "idempotency key", slog.String("event", string(e)), slog.String("key_hash", keyHash),
			slog.String("request_id", r.id), slog.String("principal", r.principal))
		return
	}
	s.Log.LogAttrs(ctx, slog.LevelInfo, "idempotency key", slog.String("event", string(e)), slog.String("key_hash", keyHash))
}

// defaultRequestTimeout bounds a request's work when Server.RequestTimeout is 0.
const defaultRequestTimeout = 30 * time.Second

// readinessTimeout bounds a readiness check.
const readinessTimeout = 2 * time.Second

// Readiness is the check for Server.Ready of a service on store and the projections of r: not
// ready while the store's backend does not answer (Store.Ping), or a projection has failed.
func Readiness(store eventstore.Store, r *projections.Runner) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			return fmt.Errorf("event store: %w", err)
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
