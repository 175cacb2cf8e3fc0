package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
)

// Begin claims the key for r, or returns the outcome to replay. Errors: fault.KeyReused,
// ErrInFlight, and the store's. Each turn of its loop looks at the key, takes the step that
// decide gives, and waits when the step is to wait.
func (k *Keys) Begin(ctx context.Context, r Request) (*Claim, *Outcome, error) {
	a := k.attempt(r)
	defer a.stop()
	for {
		now := k.now()
		v, done := a.look(ctx, now)
		if done != nil {
			return done.claim, done.replay, done.err
		}
		h := Holding{Here: v.here, Unwritten: v.held.unwritten, LeaseOver: v.leaseOver}
		step := decide(v.st, h, r.Fingerprint, now)
		done = a.take(ctx, step, v, now)
		if done == nil {
			done = a.wait(ctx, v, now)
		}
		if done != nil && done != lookAgain {
			return done.claim, done.replay, done.err
		}
	}
}

// begun is what Begin returns.
type begun struct {
	claim  *Claim
	replay *Outcome
	err    error
}

// lookAgain is what a step comes to when the store moved under it (another request claimed the
// key, took it over or recorded its outcome first): Begin looks at the key again at once.
var lookAgain = &begun{}

// attempt is one request's way through Begin.
type attempt struct {
	k      *Keys
	r      Request
	stream string
	// deadline bounds the wait in real time, whatever the clock of leases and expiry says.
	deadline time.Time
	poll     time.Duration
	// believedNew: the key is believed new, so it is claimed before its stream is read. A key the
	// sweeper's table knows was claimed (a retry after a restart, say) is read first, rather
	// than run its command only for its claim to be refused.
	believedNew bool
	watching    bool // for this process's holder of the key (see watch)
	waits       int  // the waits so far for another request that holds the key
	deferring   bool // a new key's claim is left to the caller (Request.Defer)
}

func (k *Keys) attempt(r Request) *attempt {
	stream := StreamName(r.Principal, r.Key)
	_, multi := k.Store.(eventstore.MultiStreamAppender)
	return &attempt{k: k, r: r, stream: stream, deadline: time.Now().Add(k.wait()), poll: pollFirst,
		believedNew: !k.sweeper.claimed(stream), deferring: r.Defer && multi}
}

func (a *attempt) stop() {
	if a.watching {
		a.k.holds.unwatch(a.stream)
	}
}

// view is what a turn knows of the key.
type view struct {
	st      keyState // the key's stream folded, or this process's own claim of it
	held    held
	here    bool            // this process holds the key
	changed <-chan struct{} // closed when this process completes or releases it
	// leaseOver: another's claim is past its lease; else it will be in leaseLeft, if that is
	// positive.
	leaseOver bool
	leaseLeft time.Duration
}

// look learns what is known of the key now: from this process's own claim, from its memory of
// completed keys (then it is done: a replay), or from the key's stream.
func (a *attempt) look(ctx context.Context, now time.Time) (view, *begun) {
	k := a.k
	var v view
	v.held, v.here = k.holds.heldHere(a.stream, now)
	if !a.believedNew || v.here {
		if !a.watching {
			a.watching = true
			k.holds.watch(a.stream)
		}
		// Take the channel before looking: a completion after that closes it.
		v.changed = k.holds.changes(a.stream)
		v.held, v.here = k.holds.heldHere(a.stream, now)
	}
	// Completed here, maybe by the holder this request waited for?
	if out, ok, err := k.replay(ctx, a.stream, a.r.Fingerprint); ok {
		return v, &begun{replay: out, err: err}
	}
	switch {
	case v.here:
		// A live request of this process holds the key: what a read would say is known.
		v.st = keyState{exists: true, revision: v.held.revision, first: v.held.claimed, current: v.held.claimed}
	case !a.believedNew:
		var err error
		if v.st, err = k.read(ctx, a.stream); err != nil {
			return v, &begun{err: err}
		}
		v.leaseOver, v.leaseLeft = k.leaseOver(a.stream, v.st, now)
	}
	a.believedNew = false
	return v, nil
}

// take takes a step: Begin's answer, lookAgain, or nil when the step is to wait.
func (a *attempt) take(ctx context.Context, step Step, v view, now time.Time) *begun {
	k := a.k
	switch step {
	case StepForget:
		return a.forget(ctx, v.st)
	case StepClaim:
		return a.claim(ctx, now)
	case StepRefuse:
		k.observe(ctx, EventMismatched, a.stream)
		return &begun{err: fault.KeyReused}
	case StepReplay:
		k.observe(ctx, EventReplayed, a.stream)
		if err := k.position(ctx, v.st.done); err != nil {
			return &begun{err: err}
		}
		k.remember(a.stream, v.st.first, v.st.done, Digest{}, true)
		return &begun{replay: &v.st.done.Outcome}
	case StepTakeOver:
		c, err := k.claim(ctx, a.stream, eventstore.Exact(v.st.revision), a.r, v.st.first.OrderID, now, v.st.first.ExpiresAt, false)
		if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			return lookAgain // another taker won
		}
		if c != nil {
			c.Takeover = true
			k.observe(ctx, EventTakenOver, a.stream)
		}
		return &begun{claim: c, err: err}
	}
	return nil
}

// forget deletes an expired key, for the request to start again as new.
func (a *attempt) forget(ctx context.Context, st keyState) *begun {
	err := a.k.Store.DeleteStream(ctx, a.stream, eventstore.Exact(st.revision))
	if err != nil && !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return &begun{err: fmt.Errorf("expire key: %w", err)}
	}
	if err == nil {
		a.k.observe(ctx, EventExpired, a.stream)
	}
	return lookAgain
}

// claim claims a new key, or leaves its claim to the caller's append (deferring).
func (a *attempt) claim(ctx context.Context, now time.Time) *begun {
	k := a.k
	if k.Expire != nil {
		// Before every claim: whether a delete keeps a stream's metadata is the store's
		// business, and a claim refused (another came first) is rare.
		if err := k.Expire(ctx, a.stream, k.ttl()); err != nil {
			return &begun{err: fmt.Errorf("set key expiry: %w", err)}
		}
	}
	// A deferred claim is claimed once its append is made (Claim.Appended, completeUnwritten):
	// the store may yet refuse it.
	c, err := k.claim(ctx, a.stream, eventstore.NoStream, a.r, a.r.OrderID, now, now.Add(k.ttl()), a.deferring)
	if a.deferring {
		return &begun{claim: c, err: err}
	}
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return lookAgain // another request claimed it first
	}
	if err == nil {
		k.observe(ctx, EventClaimed, a.stream)
	}
	return &begun{claim: c, err: err}
}

// wait waits for another request that holds the key, within the wait bound, and returns nil,
// or Begin's answer, or lookAgain. If that request died after appending to the order, the
// effect is there: the record is completed from it rather than after the lease. A live holder
// in this process usually wakes its waiters before the first poll ends, so the order's stream
// is looked at only after that.
func (a *attempt) wait(ctx context.Context, v view, now time.Time) *begun {
	k := a.k
	if a.waits == 1 && !v.here && a.r.FindInOrderStream != nil && v.st.first.OrderID != "" {
		// After the first wait, once: the holder may have died after its append.
		if done := a.recover(ctx, v.st); done != nil {
			return done
		}
	}
	left := time.Until(a.deadline)
	if left <= 0 {
		k.observe(ctx, EventInFlight, a.stream)
		return &begun{err: ErrInFlight}
	}
	if a.waits++; a.waits == 1 {
		k.observe(ctx, EventWaited, a.stream)
	}
	next := min(left, a.poll)
	if v.leaseLeft > 0 {
		next = min(next, v.leaseLeft+time.Millisecond)
	}
	t := time.NewTimer(next)
	defer t.Stop()
	a.poll = min(2*a.poll, pollMax)
	select {
	case <-v.changed:
	case <-t.C:
	case <-ctx.Done():
		return &begun{err: ctx.Err()}
	}
	return nil
}

// recover completes the record of a holder's outcome from the order's stream, if the
// command's events are there: Begin's answer, or lookAgain, or nil if they are not.
func (a *attempt) recover(ctx context.Context, st keyState) *begun {
	k := a.k
	out, err := a.r.FindInOrderStream(ctx, st.first.OrderID)
	switch {
	case err != nil:
		return &begun{err: err}
	case out == nil:
		return nil
	}
	err = k.complete(ctx, a.stream, st.revision, st.first.OrderID, *out)
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return lookAgain
	}
	if err == nil {
		k.remember(a.stream, st.first, &Completed{Outcome: *out}, Digest{}, false)
		k.observe(ctx, EventRecovered, a.stream)
	}
	return &begun{replay: out, err: err}
}
