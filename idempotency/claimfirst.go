package idempotency

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/acme/orders/eventstore"
)

// A store that cannot append to several streams at once (KurrentDB, through its client)
// cannot write a key's record with the command's events. There the key is claimed first, in
// an append of its own (WriteClaim); the command's events follow; the outcome is then recorded
// (Complete), or the key given up (Release). A claim whose holder died is taken over once its
// lease is over (Begin), and the taker's run finds the effect, if any, in the order's stream.

// WriteClaim appends the claim's Claimed event at its expected revision, giving the key stream
// the TTL as its maximum age. An error for which Claim.Refused is true means another request
// claimed the key meanwhile, or it existed after all: nothing was written.
func (k *Keys) WriteClaim(ctx context.Context, c *Claim) error {
	data, err := c.first.encode()
	if err != nil {
		return err
	}
	results, err := eventstore.Write(ctx, k.Store, c.append(TypeClaimed, data))
	if err != nil {
		return err
	}
	c.Expected = eventstore.Exact(results[0].Revision)
	event := EventClaimed
	if c.Takeover {
		event = EventTakenOver
	}
	k.observe(ctx, event, c.Stream)
	return nil
}

// Complete records the outcome of the written claim's request and lets the claim go. If
// another request recorded an outcome first, that one stands: Complete sets Prior, to answer
// with, and records nothing. If another request took the key over (the claim's lease ran out),
// Complete records nothing and returns ErrTakenOver: this outcome may have been decided on an
// older state of the order than the taker's, whose outcome stands.
func (k *Keys) Complete(ctx context.Context, c *Claim, out Outcome) error {
	defer k.holds.drop(c)
	data, err := Completed{Outcome: out, OrderID: c.OrderID, CompletedAt: k.now()}.encode()
	if err == nil {
		_, err = k.Store.Append(ctx, c.Stream, c.Expected, newEvent(TypeCompleted, data))
	}
	if err == nil {
		c.Sole = !c.Takeover
		k.remember(c.Stream, c.first, &Completed{Outcome: out}, c.digest, false)
		k.observe(ctx, EventCompleted, c.Stream)
		return nil
	}
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return err
	}
	st, err := k.read(ctx, c.Stream)
	switch {
	case err != nil:
		return err
	case st.done != nil:
		if err := k.position(ctx, st.done); err != nil {
			return err
		}
		k.remember(c.Stream, st.first, st.done, Digest{}, false)
		c.Prior = &st.done.Outcome
		return nil
	case !st.exists:
		// Expired meanwhile, past its TTL: no retry expects its outcome any more.
		return nil
	}
	return ErrTakenOver
}

// Release gives the written claim's key up without an outcome (the request failed with a
// 5xx), so that a retry runs the command again at once instead of waiting for the lease.
func (k *Keys) Release(ctx context.Context, c *Claim, reason string) error {
	defer k.holds.drop(c)
	data, err := json.Marshal(Released{Reason: reason, ReleasedAt: k.now()})
	if err != nil {
		return err
	}
	_, err = k.Store.Append(ctx, c.Stream, c.Expected, newEvent(TypeReleased, data))
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return nil // taken over: the taker decides
	}
	if err == nil {
		k.observe(ctx, EventReleased, c.Stream)
	}
	return err
}
