package keyed

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
)

// releaseTimeout bounds, beyond the request's, the release of a key whose outcome could not be
// recorded.
const releaseTimeout = 5 * time.Second

// writeClaimFirst is the write of a store that cannot append to several streams at once
// (KurrentDB): the key's claim is appended first, then the plan's appends, then the outcome;
// an answer that is not kept releases the key. A holder that dies after its appends leaves a
// claim that another request takes over once its lease is over: the taker's plan finds the
// effect in the work's streams (keyed events, an endpoint's or the provider log's record) and
// answers it as a replay.
func (p *Pipeline) writeClaimFirst(ctx context.Context, c *idempotency.Claim, r idempotency.Request, w Work) (Answer, error) {
	if err := p.Keys.WriteClaim(ctx, c); err != nil {
		p.Keys.Drop(c)
		if c.Refused(err) {
			return Answer{}, errStartOver
		}
		return Answer{}, err
	}
	done := false
	defer func() {
		if !done {
			// A panic between the claim and its outcome: give the key up so that a retry runs
			// at once; the work's streams tell it whether the write took effect.
			p.Keys.Release(context.WithoutCancel(ctx), c, "panic")
		}
	}()
	hook(p.Hooks.AfterClaim, r.Key)
	pl := w.plan(ctx, p, c.OrderID, !c.Takeover)
	defer pl.Close()
	for appends := pl.Next(); appends != nil; appends = pl.Next() {
		results, err := eventstore.Write(ctx, p.Keys.Store, appends...)
		pl.Written(ctx, results, err)
	}
	ran := pl.answer()
	if ran.appended {
		hook(p.Hooks.AfterAppend, r.Key)
	}
	done = true
	return p.complete(ctx, c, r, pl, ran)
}

// complete records the outcome of a claim-first run before its answer is given, or lets the
// key go if the answer is not kept.
func (p *Pipeline) complete(ctx context.Context, c *idempotency.Claim, r idempotency.Request, pl plan, ran ran) (Answer, error) {
	if !fault.Final(ran.err) {
		if err := p.Keys.Release(ctx, c, http.StatusText(ran.out.Status)); err != nil {
			p.log(r).WarnContext(ctx, "release key", "error", err)
		}
		return ran.Answer(), nil
	}
	err := p.Keys.Complete(ctx, c, ran.out)
	switch {
	case errors.Is(err, idempotency.ErrTakenOver):
		p.log(r).InfoContext(ctx, "record outcome", "error", err)
		return Answer{}, err // another request runs the key now: its outcome stands
	case err != nil:
		// The effect, if any, is in the work's streams: the next retry finds it there. Let
		// the key go, so that it runs at once rather than after the lease.
		p.log(r).WarnContext(ctx, "record outcome", "error", err)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		p.Keys.Release(ctx, c, "outcome not recorded")
		return Answer{}, err
	case c.Prior != nil:
		return Answer{Outcome: *c.Prior, Replayed: true}, nil // a retry recorded first
	}
	if c.Sole {
		pl.keep()
	}
	return ran.Answer(), nil
}
