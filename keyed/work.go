package keyed

import (
	"context"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
)

// Work is a keyed write, as the pipeline runs it: an OrderCommand, the Registration or Rotation
// of a webhook endpoint, or a provider's event recorded in the provider log (Unapplied). The
// pipeline plans it on its subject (the order or the endpoint that the key is claimed with),
// makes the plan's appends with the key's record, and answers what it came to.
type Work interface {
	// plan decides the work on subject; fresh: the subject was drawn for this very claim.
	plan(ctx context.Context, p *Pipeline, subject string, fresh bool) plan
}

// plan is a Work decided, its appends not made yet.
type plan interface {
	// Next returns the appends to make, all or nothing; nil once the plan is done.
	Next() []eventstore.StreamAppend
	// Written tells the plan what the store did: it is then done, or decided again.
	Written(ctx context.Context, results []eventstore.AppendResult, err error)
	Close()
	// answer is what the plan comes to, as decided, or as written once it is done: the
	// outcome, with the log position of its effect once the store told it.
	answer() ran
	// position is the log position of the plan's effect, once written; 0 if it has none.
	position() uint64
	// at names the event whose log position is the outcome's, for a record written in the same
	// append before the store tells it (idempotency.At).
	at() idempotency.At
	// keep keeps what the plan wrote as known, once its key is kept by a claim no other
	// request ran (command.Plan.Keep).
	keep()
}

// ran is what a plan comes to.
type ran struct {
	out idempotency.Outcome
	err error // the work's error: a final one is kept with the key, another lets it go
	// repeated: the work's effect was in its streams already; the answer is a replay.
	repeated bool
	// appended: the work wrote its effect (for Hooks.AfterAppend).
	appended bool
}

// Answer is the answer of a run that came to r.
func (r ran) Answer() Answer { return Answer{Outcome: r.out, Replayed: r.repeated, Err: r.err} }
