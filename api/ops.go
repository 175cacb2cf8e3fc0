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
