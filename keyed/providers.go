package keyed

import (
	"context"
	"errors"
	"fmt"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/providers"
)

// Unapplied is a provider's event recorded in the provider log rather than applied to an order
// (it names no order of its principal, or reports nothing the service acts on), as the
// pipeline runs it: the log's append (providers.LogAppend) is made with the key's record.
type Unapplied struct {
	Event providers.Unapplied
	// Render turns the record that stands into the answer stored and replayed. It must be pure.
	Render func(u providers.Unapplied, err error) idempotency.Outcome
}

func (w Unapplied) plan(_ context.Context, p *Pipeline, _ string, _ bool) plan {
	a, err := providers.LogAppend(w.Event)
	g := &logPlan{w: w, store: p.Keys.Store, u: w.Event, err: err}
	if err == nil {
		g.next = []eventstore.StreamAppend{a}
	}
	return g
}

// logPlan is the provider log's append as the pipeline carries it out. The log's stream is
// written only if it does not exist, so a record written is this one.
type logPlan struct {
	w        Unapplied
	store    eventstore.Store
	next     []eventstore.StreamAppend
	u        providers.Unapplied // the record that stands
	repeated bool                // the log held the event already
	err      error
}

func (g *logPlan) Next() []eventstore.StreamAppend { return g.next }

// Written: a refusal is the log's stream existing: the first record stands.
func (g *logPlan) Written(ctx context.Context, _ []eventstore.AppendResult, err error) {
	g.next = nil
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		e := g.w.Event
		var found bool
		g.u, found, err = providers.Recorded(ctx, g.store, e.Principal, e.Provider, e.EventID)
		if err == nil && !found {
			err = fmt.Errorf("provider log of %s event %s: refused as existing, read as missing", e.Provider, e.EventID)
		}
		g.repeated = err == nil
	}
	g.err = err
}

func (g *logPlan) Close() {}

func (g *logPlan) answer() ran {
	return ran{out: g.w.Render(g.u, g.err), err: g.err, repeated: g.repeated, appended: !g.repeated && g.err == nil && g.next == nil}
}

func (g *logPlan) at() idempotency.At { return idempotency.At{} }
func (g *logPlan) position() uint64   { return 0 }
func (g *logPlan) keep()              {}
