package api

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
)

// defaultRequestTimeout bounds a request's work when Server.RequestTimeout is 0.
const defaultRequestTimeout = 30 * time.Second

// readinessTimeout bounds a readiness check.
const readinessTimeout = 2 * time.Second

// WriteChecker is a store that can tell, without writing, whether it takes writes now. A
// PostgreSQL server turned read-only (a standby after a failover) answers Ping and reads but
// refuses every write: only such a check keeps readiness from sending traffic to it.
type WriteChecker interface {
	// CheckWritable returns why the store takes no writes now (an error matching
	// eventstore.ErrUnavailable), or nil; or why it cannot tell, as Ping would fail.
	CheckWritable(ctx context.Context) error
}

// Readiness is the check for Server.Ready of a service on store and the projections of r: not
// ready while the store's backend does not answer (Store.Ping) or, where the store is a
// WriteChecker, takes no writes, or while a projection has failed.
func Readiness(store eventstore.Store, r *projections.Runner) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			return fmt.Errorf("event store: %w", err)
		}
		if wc, ok := store.(WriteChecker); ok {
			if err := wc.CheckWritable(ctx); err != nil {
				return fmt.Errorf("event store: %w", err)
			}
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
