package idempotency

import (
	"context"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
)

// Begin takes hold of the key for r, or returns the outcome to replay. It writes nothing: the
// claim it returns is the request's in this process, and its record (Claim.Record, or
// Keys.WriteClaim then Complete on a store that writes the claim first) is the caller's to
// write, at the claim's expected revision, which the store refuses should another request
// have claimed the key meanwhile. Errors: fault.KeyReused, ErrInFlight, and the store's. Each
// turn of its loop looks at the key, takes the step that decide gives, and waits when the
// step is to wait.
func (k *Keys) Begin(ctx context.Context, r Request) (*Claim, *Outcome, error) {
	a := k.attempt(r)
	defer a.stop()
	for {
		now := k.now()
		v, done := a.look(ctx)
		if done != nil {
			return done.claim, done.replay, done.err
		}
		step := decide(v.st, Holding{Here: v.here, LeaseOver: v.leaseOver}, r.Fingerprint, now)
		if done = a.take(ctx, step, v, now); done == nil {
			done = a.wait(ctx, v)
		}
		if done != nil {
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

// attempt is one request's way through Begin.
type attempt struct {
	k      *Keys
	r      Request
	stream string
	// deadline bounds the wait in real time, whatever the clock of leases and expiry says.
	deadline time.Time
	poll     time.Duration
	// believedNew: the key is taken for new (this process knows no completion of it), so it is
	// claimed before its stream is read; a claim the store refuses starts over with
	// Request.ReadFirst.
	believedNew bool
	watching    bool // for this process's holder of the key (see watch)
	waits       int  // the waits so far for another request that holds the key
}

func (k *Keys) attempt(r Request) *attempt {
	stream := StreamName(r.Principal, r.Key)
	return &attempt{k: k, r: r, stream: stream, deadline: time.Now().Add(k.wait()),
		poll: pollFirst, believedNew: !r.ReadFirst && !k.known(stream)}
}

func (a *attempt) stop() {
	if a.watching {
		a.k.holds.unwatch(a.stream)
	}
}

// view is what a turn knows of the key.
type view struct {
	st      keyState // the key's stream folded
	here    bool     // a request of this process holds the key
	changed <-chan struct{}
	// leaseOver: another's claim is past its lease; else it will be in leaseLeft, if that is
	// positive.
	leaseOver bool
	leaseLeft time.Duration
}

// look learns what is known of the key now: whether a request of this process holds it, what
// the memory of completed keys holds of it (then it is done: a replay), or the key's stream.
func (a *attempt) look(ctx context.Context) (view, *begun) {
	k := a.k
	var v view
	v.here = k.holds.heldHere(a.stream)
	if !a.believedNew || v.here {
		if !a.watching {
			a.watching = true
			k.holds.watch(a.stream)
		}
		// Take the channel before looking: a completion after that closes it.
		v.changed = k.holds.changes(a.stream)
		v.here = k.holds.heldHere(a.stream)
	}
	// Completed here, maybe by the holder this request waited for?
	if out, ok, err := k.replay(ctx, a.stream, a.r.Fingerprint); ok {
		return v, &begun{replay: out, err: err}
	}
	if !a.believedNew && !v.here {
		var err error
		if v.st, err = k.read(ctx, a.stream); err != nil {
			return v, &begun{err: err}
		}
		v.leaseOver, v.leaseLeft = k.leaseOver(a.stream, v.st, k.now())
	}
	a.believedNew = false
	return v, nil
}

// take takes a step: Begin's answer, or nil when the step is to wait.
func (a *attempt) take(ctx context.Context, step Step, v view, now time.Time) *begun {
	k := a.k
	switch step {
	case StepClaim:
		return &begun{claim: k.hold(a.r, a.stream, eventstore.NoStream, a.r.OrderID, now, now.Add(k.ttl()), false)}
	case StepClaimExpired:
		k.observe(ctx, EventExpired, a.stream)
		return &begun{claim: k.hold(a.r, a.stream, eventstore.Exact(v.st.revision), a.r.OrderID, now, now.Add(k.ttl()), false)}
	case StepTakeOver:
		return &begun{claim: k.hold(a.r, a.stream, eventstore.Exact(v.st.revision), v.st.first.OrderID, now, v.st.first.ExpiresAt, true)}
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
	}
	return nil
}

// wait waits for another request that holds the key, within the wait bound, and returns nil
// to look again, or Begin's answer.
func (a *attempt) wait(ctx context.Context, v view) *begun {
	k := a.k
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
