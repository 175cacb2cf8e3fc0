package keyed

import (
	"context"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
)

// writeAtomic is the write of a store that appends to several streams at once: the work's
// plan, then one append of the key's record (claim and outcome in one event) with the plan's
// appends, all or nothing. The outcome is certain before the append: written, the events are
// this run's, as the store refuses them should they repeat another's (eventstore.PartialRepeat).
// A refusal by the key's stream starts over; by another stream, the plan is decided again on
// what the store holds now. An answer that is not kept (a passing condition of the server)
// writes nothing of the key.
func (p *Pipeline) writeAtomic(ctx context.Context, c *idempotency.Claim, r idempotency.Request, w Work) (Answer, error) {
	defer p.Keys.Drop(c) // a no-op once the claim is kept; a panic lets the key go
	hook(p.Hooks.AfterClaim, r.Key)
	pl := w.plan(ctx, p, c.OrderID, !c.Takeover)
	defer pl.Close()
	for {
		decided, appends := pl.answer(), pl.Next()
		if !fault.Final(decided.err) && appends == nil {
			return decided.Answer(), nil
		}
		at := pl.at()
		record, err := c.Record(decided.out, at)
		if err != nil {
			return Answer{}, err
		}
		results, err := eventstore.Write(ctx, p.Keys.Store, append([]eventstore.StreamAppend{record}, appends...)...)
		switch {
		case c.Refused(err):
			return Answer{}, errStartOver
		case err != nil && appends == nil:
			return Answer{}, err // the record alone: the store's failure is the answer
		}
		if appends != nil {
			if err == nil {
				results = results[1:]
				hook(p.Hooks.AfterAppend, r.Key)
			}
			pl.Written(ctx, results, err)
		}
		if err != nil {
			continue // decided again, or its error is the answer
		}
		if at.PositionStream != "" {
			// The answer is the one recorded, at the log position the store gave its effect.
			decided.out.Position = pl.position()
		}
		p.Keys.Kept(ctx, c, decided.out)
		if c.Sole {
			pl.keep()
		}
		return decided.Answer(), nil
	}
}
