package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/lease"
)

// Keys runs the key protocol on an event store. Set Store; the other fields have defaults.
type Keys struct {
	Store eventstore.Store
	// TTL is how long a key is kept from its first claim; 0 means 24 hours. It is the TTL of
	// every key this process reads, whatever TTL the key was claimed under, so that an operator's
	// change of it holds for the keys already kept (see Keys.expiry).
	TTL time.Duration
	// Lease is the terms of the claims' lease (see package lease): a claim holds its key until
	// another request has seen it unchanged for Lease.Length (0 means 10 seconds), or at once
	// when its holder is gone.
	Lease lease.Terms
	// Wait bounds how long a request waits for the holder of its key; 0 means 2 seconds.
	Wait time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log, if set, hears each step of a key's life (see Event) with the key's hash (KeyHash),
	// logged with the request's context, and each failed round of Sweep; Steps, if set,
	// counts both.
	Log   *slog.Logger
	Steps *Steps
	// RememberBytes bounds the memory that completed keys take, so that their replays need no
	// read of the store; 0 means RememberDefault (32 MiB), a negative number none. An eighth of
	// it keeps keys read from the store for a replay (see memory). An outcome larger than 64
	// KiB (or than a 64th of the budget) stays in the store: its replay reads it.
	RememberBytes int64
	// Expire, if set, has the store itself drop the events of a key stream once they are older
	// than ttl (KurrentDB's $maxAge), in place of a sweeper; a stream whose events are all gone
	// must read as not found and take a claim with NoStream. Begin calls it with the TTL before
	// its first claim of a key, so that no key stream is ever without its expiry, whatever
	// crash follows; it costs a write for a new key, and a refused write and a read when the key
	// turns out to exist (see eventstore/kurrent's SetMaxAge). An error fails the Begin with
	// nothing claimed. Takeovers and outcomes need no call: the expiry is the stream's.
	Expire func(ctx context.Context, stream string, ttl time.Duration) error

	completed completed // the memory of completed keys

	holds holds // the claims this process holds, and its requests waiting for them

	sightings lease.Sightings // of the claims of others, whose holders requests here wait for

	sweeper sweeper // the sweeper's state, with a mutex of its own
}

// held is a claim of this process that has not been completed or released yet.
type held struct {
	claimed  Claimed
	revision uint64
	claim    *Claim
	// unwritten: the claim is not written yet (Request.Defer), so the store has not said whether
	// the key was free: its fingerprint stands for nothing until then.
	unwritten bool
}

// waiters are the requests of this process waiting for one key's holder.
type waiters struct {
	changed chan struct{} // closed and replaced when this process completes or releases the key
	n       int
}

// Request is what Begin needs to know of an HTTP request.
type Request struct {
	Principal, Key    string
	Method, Path      string
	Fingerprint       string
	OrderID           string // the order the request acts on, or the id drawn for a create's
	Claimant          string // who claims, for the record (node and request id)
	FindInOrderStream func(ctx context.Context, orderID string) (*Outcome, error)
	// Digest identifies the request's bytes (DigestOf), if known: once the key is
	// completed here, a retry with these very bytes is replayed from memory without its
	// fingerprint (Keys.RecallBytes).
	Digest Digest
	// Defer lets Begin leave the claim of a key that looks new unwritten, on a store that
	// appends to several streams at once: the caller then makes the claim's append along
	// with the command's events (Claim.Append, Claim.Appended), so that a new key costs the
	// store no write of its own. A command that writes nothing has its claim written with
	// its outcome by Complete.
	Defer bool
}

// Claim is a key this request holds: run the command, then Complete or Release.
type Claim struct {
	Stream   string
	Revision uint64 // of this request's Claimed event
	OrderID  string
	// Takeover is set when the key was taken over from a request that died or gave up; the
	// command may already have taken effect, which the order's stream will tell.
	Takeover bool
	// Sole is set by Complete when it recorded the outcome of a claim that was neither a
	// takeover nor taken over: no other request can have run the command meanwhile.
	Sole bool
	// Prior is set by Complete when another run of the key had recorded its outcome first:
	// that one stands, and is what retries get.
	Prior *Outcome

	first     Claimed                  // this claim, standing for the key's first: fingerprint and expiry
	digest    Digest                   // of the request's bytes, whose fingerprint is the first's (Request.Digest)
	unwritten *eventstore.StreamAppend // the claim's append, while it is not made (Request.Defer)
	// along: the claim's unwritten append records the key's outcome too (AppendWithOutcome); withOutcome:
	// that append is made.
	along, withOutcome bool
	keys               *Keys
}

// Append returns the claim's append while it is not made: Begin left it to the caller, to
// make with the command's own (Request.Defer), all or nothing. Call Appended once it is made.
func (c *Claim) Append() (eventstore.StreamAppend, bool) {
	if c.unwritten == nil {
		return eventstore.StreamAppend{}, false
	}
	c.along = false // this append is the claim alone, whatever an AppendWithOutcome before it gave
	return *c.unwritten, true
}

// AppendWithOutcome is Append for an append that records the key's outcome out as well, in one event
// with the claim (Recorded), so that the key is completed in the very step that makes the
// command's effect, and Complete writes nothing. Use it only where what the command's events
// will say is certain before the store writes them: another run's events in their place would
// leave an outcome that is not theirs. Out's Position is that of an event of the same append,
// which only the store tells: at names it, and a read of the key takes it from there.
// AppendWithOutcome returns false once the claim's append is made.
func (c *Claim) AppendWithOutcome(out Outcome, at At) (eventstore.StreamAppend, bool) {
	if c.unwritten == nil {
		return eventstore.StreamAppend{}, false
	}
	out.Position = 0
	data, err := Recorded{Claimed: c.first, Outcome: out, At: at}.encode()
	if err != nil {
		return c.Append() // Complete records it, or tells why it cannot
	}
	c.along = true
	a := *c.unwritten
	a.Events = []eventstore.EventData{newEvent(TypeRecorded, data)}
	return a, true
}

// HasOutcome reports whether the claim's append, made, recorded the key's outcome too
// (AppendWithOutcome): Complete then only ends the claim.
func (c *Claim) HasOutcome() bool { return c.withOutcome }

// Appended records that the claim's append was made, with its result; ctx is the request's, for
// the key's log and count (Keys.Log, Keys.Steps), which hear only now that the key is claimed. If it was AppendWithOutcome's, the
// key's outcome is recorded too.
func (c *Claim) Appended(ctx context.Context, res eventstore.AppendResult) {
	c.unwritten = nil
	c.Revision = res.Revision
	c.withOutcome = c.along
	c.keys.holds.hold(c.Stream, held{claimed: c.first, revision: c.Revision, claim: c})
	c.keys.observe(ctx, EventClaimed, c.Stream)
}

// Refused reports whether err is the refusal of the claim's append, left unmade by Begin,
// because its key stream exists after all (a key of an earlier run that neither this
// process's memory nor the sweeper's table of claimed keys held): nothing was written.
// Release the claim and call Begin again for what the key holds: the claim noted the key as
// claimed, so Begin reads it first.
func (c *Claim) Refused(err error) bool {
	var wrong *eventstore.WrongExpectedRevisionError
	return c.unwritten != nil && errors.As(err, &wrong) && wrong.Stream == c.Stream
}

func (k *Keys) ttl() time.Duration { return or(k.TTL, 24*time.Hour) }

func (k *Keys) lease() lease.Terms {
	t := k.Lease
	t.Length = or(t.Length, 10*time.Second)
	return t
}

// leaseOver reports whether the claim st holds, by a holder that is not this process, is past
// its lease, and how long until it will be if the key stays as it is.
func (k *Keys) leaseOver(stream string, st keyState, now time.Time) (bool, time.Duration) {
	if !st.exists || st.done != nil || st.released {
		return false, 0
	}
	holder, _, _ := strings.Cut(st.current.Claimant, "/")
	return k.sightings.Over(k.lease(), stream, holder, st.revision, now)
}

func (k *Keys) wait() time.Duration { return or(k.Wait, 2*time.Second) }

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (k *Keys) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// A waiting request rereads the key stream first after pollFirst, then twice as long each
// time up to pollMax, for holders on other nodes; holders in this process wake it at once.
// Backing off keeps a storm of duplicates from drowning the holder in reads.
const (
	pollFirst = 25 * time.Millisecond
	pollMax   = 400 * time.Millisecond
)

// RecallBytes answers a request whose key this process completed, from memory, if the request's
// bytes are those of a request that ran with the key (Request.Digest): then its fingerprint is
// the key's, and needs no computing. ok is false otherwise; Recall or Begin then give the answer.
func (k *Keys) RecallBytes(ctx context.Context, principal, key string, d Digest) (out *Outcome, ok bool) {
	stream := StreamName(principal, key)
	done, ok := k.recall(stream, k.now())
	if !ok || done.onDisk || d == (Digest{}) || done.digest != d {
		return nil, false
	}
	k.observe(ctx, EventReplayed, stream)
	return done.outcome(), true
}

// replay answers a request whose key this process remembers completed, without touching the
// store: the outcome to replay, or fault.KeyReused. ok is false if the key is not remembered.
func (k *Keys) replay(ctx context.Context, stream, fingerprint string) (*Outcome, bool, error) {
	done, ok := k.recall(stream, k.now())
	switch {
	case !ok:
		return nil, false, nil
	case done.fingerprint != digestOf(fingerprint):
		k.observe(ctx, EventMismatched, stream)
		return nil, true, fault.KeyReused
	}
	var out *Outcome
	if !done.onDisk {
		out = done.outcome()
	} else {
		var err error
		if out, err = k.outcomeOnDisk(ctx, stream, done); out == nil || err != nil {
			return nil, false, nil // Begin reads the key and tells what it holds
		}
	}
	k.observe(ctx, EventReplayed, stream)
	return out, true, nil
}

// claim claims the key stream at expected, with the append of its Claimed event, unless defer
// leaves that append to the caller (Request.Defer): the claim then holds the key in this process
// only, and the key is noted as claimed at once (sweeper.claimed), as it may be written any time.
func (k *Keys) claim(ctx context.Context, stream string, expected eventstore.ExpectedRevision, r Request, orderID string, now, expires time.Time, deferred bool) (*Claim, error) {
	claimed := Claimed{Principal: r.Principal, Key: r.Key, Method: r.Method, Path: r.Path, Fingerprint: r.Fingerprint,
		OrderID: orderID, Claimant: r.Claimant, ClaimedAt: now, LeaseUntil: now.Add(k.lease().Length), ExpiresAt: expires}
	data, err := claimed.encode()
	if err != nil {
		return nil, err
	}
	// A takeover's claim has the original's fingerprint and expiry: it stands for it. It is held
	// here before its append, so that no request here sees it in the store unheld, as that of
	// a request of this process that is gone.
	a := eventstore.StreamAppend{Stream: stream, Expected: expected, Events: []eventstore.EventData{newEvent(TypeClaimed, data)}}
	c := &Claim{Stream: stream, OrderID: orderID, first: claimed, digest: r.Digest, keys: k, unwritten: &a}
	k.holds.hold(stream, held{claimed: claimed, claim: c, unwritten: true})
	if deferred {
		k.sweeper.noteKnown(stream)
		return c, nil
	}
	res, err := k.Store.Append(ctx, stream, expected, a.Events...)
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		// An append that failed otherwise (its context cancelled, say) may have been written.
		k.sweeper.noteKnown(stream)
	}
	if err != nil {
		k.holds.drop(c)
		return nil, err
	}
	c.unwritten, c.Revision = nil, res.Revision
	k.holds.hold(stream, held{claimed: claimed, revision: res.Revision, claim: c})
	return c, nil
}

// Complete records the outcome of the claim's request. If another request recorded an outcome
// first (a retry that found the effect in the order's stream), that one stands: Complete sets
// Prior, to answer with, and records nothing. If another request took the key over (the
// claim's lease ran out), Complete records nothing and returns ErrTakenOver: this outcome may
// have been decided on an older state of the order than the taker's, whose outcome stands.
//
// A claim left unmade (Claim.Append) is appended with its outcome, in one append. If that is
// refused because the key stream exists after all, Complete records nothing and returns an
// error for which Claim.Refused is true.
func (k *Keys) Complete(ctx context.Context, c *Claim, out Outcome) error {
	switch {
	case c.unwritten != nil:
		return k.completeUnwritten(ctx, c, out)
	case c.withOutcome:
		k.endWithOutcome(ctx, c, &Completed{Outcome: out}) // recorded with the claim: out must be the outcome given it
		return nil
	}
	defer k.holds.drop(c)
	err := k.complete(ctx, c.Stream, c.Revision, c.OrderID, out)
	if err == nil {
		if !c.Takeover {
			c.Sole = true
		}
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
		// Expired and deleted meanwhile, past its TTL: no retry expects its outcome any more.
		return nil
	}
	return ErrTakenOver
}

func (k *Keys) completeUnwritten(ctx context.Context, c *Claim, out Outcome) error {
	data, err := Recorded{Claimed: c.first, Outcome: out}.encode()
	var res eventstore.AppendResult
	if err == nil {
		res, err = k.Store.Append(ctx, c.Stream, c.unwritten.Expected, newEvent(TypeRecorded, data))
	}
	if err != nil {
		k.holds.drop(c)
		return err
	}
	c.unwritten, c.Revision = nil, res.Revision
	k.observe(ctx, EventClaimed, c.Stream)
	k.endWithOutcome(ctx, c, &Completed{Outcome: out})
	return nil
}

// endWithOutcome ends a claim whose outcome is recorded with its own claim, so that no other request
// can have run the key: it is kept.
func (k *Keys) endWithOutcome(ctx context.Context, c *Claim, done *Completed) {
	c.Sole = true
	k.remember(c.Stream, c.first, done, c.digest, false)
	k.observe(ctx, EventCompleted, c.Stream)
	k.holds.drop(c)
}

func (k *Keys) complete(ctx context.Context, stream string, rev uint64, orderID string, out Outcome) error {
	data, err := Completed{Outcome: out, OrderID: orderID, CompletedAt: k.now()}.encode()
	if err != nil {
		return err
	}
	e := newEvent(TypeCompleted, data)
	_, err = k.Store.Append(ctx, stream, eventstore.Exact(rev), e)
	return err
}

// Release gives the key up without an outcome (the request failed with a 5xx), so that a
// retry runs the command again at once instead of waiting for the lease.
func (k *Keys) Release(ctx context.Context, c *Claim, reason string) error {
	defer k.holds.drop(c)
	if c.unwritten != nil {
		return nil // never written: nothing to give up in the store
	}
	data, err := json.Marshal(Released{Reason: reason, ReleasedAt: k.now()})
	if err != nil {
		return err
	}
	e := newEvent(TypeReleased, data)
	_, err = k.Store.Append(ctx, c.Stream, eventstore.Exact(c.Revision), e)
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return nil // taken over: the taker decides
	}
	if err == nil {
		k.observe(ctx, EventReleased, c.Stream)
	}
	return err
}

func (k *Keys) read(ctx context.Context, stream string) (keyState, error) {
	var st keyState
	for e, err := range k.Store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return keyState{}, nil
		}
		if err != nil {
			return keyState{}, fmt.Errorf("read key: %w", err)
		}
		if err := st.apply(e); err != nil {
			return keyState{}, err
		}
	}
	st.first.ExpiresAt = k.expiry(st.first)
	return st, nil
}

// expiry is when the key of its first claim c expires under this process's TTL. The expiry
// recorded in the claim is the one of the TTL it was claimed under; it stands only for claims
// that tell no time.
func (k *Keys) expiry(c Claimed) time.Time {
	if c.ClaimedAt.IsZero() {
		return c.ExpiresAt
	}
	return c.ClaimedAt.Add(k.ttl())
}

// position gives an outcome recorded with the command's events (Claim.AppendWithOutcome) the log
// position of the event it names, read from that event: before the outcome is answered or
// remembered, and only then (a sweep or a decision needs no position).
func (k *Keys) position(ctx context.Context, done *Completed) error {
	if done.PositionStream == "" {
		return nil
	}
	for e, err := range k.Store.ReadStream(ctx, done.PositionStream, eventstore.ReadStreamOptions{From: done.PositionRevision, Limit: 1}) {
		if err != nil {
			return fmt.Errorf("read the position of the key's outcome: %w", err)
		}
		if e.Revision != done.PositionRevision {
			break
		}
		done.Position = e.Position.Commit
		return nil
	}
	return fmt.Errorf("the key's outcome takes its position from event %d of %s, which the store does not hold",
		done.PositionRevision, done.PositionStream)
}
