package idempotency

import (
	"context"
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
	// TTL is how long a key is kept from its first claim; 0 means 24 hours. The key's append
	// gives its stream the TTL as its maximum age (eventstore.StreamAppend.MaxAge), so the store
	// forgets the key then; a key written before the store kept its age expires by the TTL of
	// the process that reads it (see Keys.expiry).
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
	// logged with the request's context; Steps, if set, counts them.
	Log   *slog.Logger
	Steps *Steps
	// RememberBytes bounds the memory that completed keys take, so that their replays need no
	// read of the store; 0 means RememberDefault (64 MiB), a negative number none. An outcome
	// larger than 64 KiB (or than a 64th of the budget) stays in the store: its replay reads it.
	RememberBytes int64

	completed completed // the memory of completed keys

	holds holds // the claims this process holds, and its requests waiting for them

	sightings lease.Sightings // of the claims of others, whose holders requests here wait for
}

// waiters are the requests of this process waiting for one key's holder.
type waiters struct {
	changed chan struct{} // closed and replaced when this process lets a claim of the key go
	n       int
}

// Request is what Begin needs to know of a keyed request.
type Request struct {
	Principal, Key string
	Method, Path   string
	Fingerprint    string
	OrderID        string // the subject the request acts on, or the id drawn for a create's
	Claimant       string // who claims, for the record (node and request id)
	// Digest identifies the request's bytes (DigestOf), if known: once the key is
	// completed here, a retry with these very bytes is replayed from memory without its
	// fingerprint (Keys.RecallBytes).
	Digest Digest
	// ReadFirst: the key may exist (its claim was refused), so Begin reads its stream before
	// it claims the key; otherwise a key that this process does not know is taken for new,
	// and its claim written at once.
	ReadFirst bool
}

// Claim is a key a request of this process holds, nothing written yet: the request writes its
// record at Expected, which the store refuses if another request claimed the key meanwhile
// (Refused), and then lets the claim go (Keys.Kept, Keys.Drop; on a store that writes the
// claim first, Keys.WriteClaim and then Keys.Complete or Keys.Release).
type Claim struct {
	Stream   string
	Expected eventstore.ExpectedRevision // NoStream for a new key; the stream's revision for a takeover
	OrderID  string
	// Takeover is set when the key was taken over from a request that died or gave up; the
	// command may already have taken effect, which the order's stream will tell.
	Takeover bool
	// Sole is set once the outcome is recorded by a claim that was neither a takeover nor
	// taken over: no other request can have run the command meanwhile.
	Sole bool
	// Prior is set by Complete when another run of the key had recorded its outcome first:
	// that one stands, and is what retries get.
	Prior *Outcome

	first  Claimed // this claim, standing for the key's first: fingerprint and expiry
	digest Digest  // of the request's bytes, whose fingerprint is the first's (Request.Digest)
	keys   *Keys
}

// hold makes a claim of the key stream at expected for r and holds it in this process.
func (k *Keys) hold(r Request, stream string, expected eventstore.ExpectedRevision, orderID string, now, expires time.Time, takeover bool) *Claim {
	claimed := Claimed{Principal: r.Principal, Key: r.Key, Method: r.Method, Path: r.Path, Fingerprint: r.Fingerprint,
		OrderID: orderID, Claimant: r.Claimant, ClaimedAt: now, LeaseUntil: now.Add(k.lease().Length), ExpiresAt: expires}
	c := &Claim{Stream: stream, Expected: expected, OrderID: orderID, Takeover: takeover, first: claimed, digest: r.Digest, keys: k}
	k.holds.hold(c)
	return c
}

// Record is the append of the key's record: its claim and the outcome out in one event
// (Recorded), at the claim's expected revision, giving the key stream the TTL as its maximum
// age. Write it in one atomic append with the command's events, so that the key is recorded
// in the very step that makes the command's effect: out must be what those events come to,
// certain before the store writes them. Out's Position is that of an event of the same append,
// which only the store tells: at names it, and a read of the key takes it from there.
func (c *Claim) Record(out Outcome, at At) (eventstore.StreamAppend, error) {
	if at.PositionStream != "" {
		out.Position = 0 // read from the event at names
	}
	data, err := Recorded{Claimed: c.first, Outcome: out, At: at}.encode()
	if err != nil {
		return eventstore.StreamAppend{}, err
	}
	return c.append(TypeRecorded, data), nil
}

func (c *Claim) append(typ string, data []byte) eventstore.StreamAppend {
	return eventstore.StreamAppend{Stream: c.Stream, Expected: c.Expected,
		Events: []eventstore.EventData{newEvent(typ, data)}, MaxAge: c.keys.ttl()}
}

// Refused reports whether err is the store's refusal of the claim's append, because another
// request claimed the key meanwhile or the key existed after all: nothing was written. Drop
// the claim and Begin again with Request.ReadFirst, for what the key holds.
func (c *Claim) Refused(err error) bool {
	var wrong *eventstore.WrongExpectedRevisionError
	return errors.As(err, &wrong) && wrong.Stream == c.Stream
}

// Kept lets go of a claim whose record (Record) was written, with out, the outcome answered.
func (k *Keys) Kept(ctx context.Context, c *Claim, out Outcome) {
	c.Sole = !c.Takeover
	event := EventClaimed
	if c.Takeover {
		event = EventTakenOver
	}
	k.observe(ctx, event, c.Stream)
	k.remember(c.Stream, c.first, &Completed{Outcome: out}, c.digest, false)
	k.observe(ctx, EventCompleted, c.Stream)
	k.holds.drop(c)
}

// Drop lets go of a claim whose record was not written: the answer is not kept, or the store
// refused the claim.
func (k *Keys) Drop(c *Claim) { k.holds.drop(c) }

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

// Replay answers r from the memory of completed keys, without touching the store: the
// outcome to replay, or fault.KeyReused. ok is false if the key is not remembered.
func (k *Keys) Replay(ctx context.Context, r Request) (*Outcome, bool, error) {
	return k.replay(ctx, StreamName(r.Principal, r.Key), r.Fingerprint)
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
// remembered, and only then (a decision needs no position).
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
