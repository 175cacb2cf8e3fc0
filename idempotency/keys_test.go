package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/lease"
	"github.com/google/uuid"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newKeys(t *testing.T) (*idempotency.Keys, *clock, *sqlite.Store) {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	clk := &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	return &idempotency.Keys{Store: s, TTL: time.Hour, Lease: lease.Terms{Length: 10 * time.Second, Node: "test"}, Wait: 50 * time.Millisecond, Now: clk.Now}, clk, s
}

func request(fingerprint string) idempotency.Request {
	return idempotency.Request{
		Principal: "shop-1", Key: "k1", Method: "POST", Path: "/v1/orders", Fingerprint: fingerprint,
		OrderID: "order-" + fingerprint, Claimant: "test/r",
	}
}

var created = idempotency.Outcome{Status: 201, Headers: map[string]string{"Location": "/v1/orders/x"}, Body: "{\"id\":\"x\"}\n"}

func TestClaimCompleteReplay(t *testing.T) {
	keys, _, _ := newKeys(t)
	ctx := context.Background()
	claim, replay, err := keys.Begin(ctx, request("fp"))
	if err != nil || replay != nil || claim == nil || claim.OrderID != "order-fp" || claim.Takeover {
		t.Fatalf("first Begin: %+v, %+v, %v", claim, replay, err)
	}
	// Held, not done: a duplicate waits its bound, then hears the key is in flight.
	if _, _, err := keys.Begin(ctx, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("duplicate while held: got %v, want ErrInFlight", err)
	}
	if _, _, err := keys.Begin(ctx, request("other")); !errors.Is(err, fault.KeyReused) {
		t.Fatalf("other request while held: got %v, want ErrKeyReused", err)
	}
	if err := keys.Complete(ctx, claim, created); err != nil || !claim.Sole {
		t.Fatalf("Complete: %v, kept %v", err, claim.Sole)
	}
	_, replay, err = keys.Begin(ctx, request("fp"))
	if err != nil || replay == nil || replay.Body != created.Body || replay.Status != 201 || replay.Headers["Location"] != "/v1/orders/x" {
		t.Fatalf("after completion: %+v, %v", replay, err)
	}
	if _, _, err := keys.Begin(ctx, request("other")); !errors.Is(err, fault.KeyReused) {
		t.Fatalf("other request after completion: got %v, want ErrKeyReused", err)
	}
	other := request("fp")
	other.Principal = "shop-2"
	if c, _, err := keys.Begin(ctx, other); err != nil || c == nil {
		t.Fatalf("another principal's key: %+v, %v", c, err)
	}
}

// heldWithCounts claims k1 on keys whose store counts the reads and appends made through it,
// and whose duplicates wait up to 5 s.
func heldWithCounts(t *testing.T) (*idempotency.Keys, *countingStore, *idempotency.Claim) {
	t.Helper()
	keys, _, s := newKeys(t)
	counted := &countingStore{Store: s}
	keys.Store, keys.Wait = counted, 5*time.Second
	claim, _, err := keys.Begin(context.Background(), request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	return keys, counted, claim
}

// Duplicates of a request this process is running wait for it without touching the store, and
// replay its outcome as soon as it is recorded.
func TestDuplicatesWaitForTheHolder(t *testing.T) {
	keys, counted, claim := heldWithCounts(t)
	ctx := context.Background()
	const n = 20
	var wg sync.WaitGroup
	var replays atomic.Int32
	started := make(chan struct{}, n)
	for range n {
		wg.Go(func() {
			started <- struct{}{}
			_, replay, err := keys.Begin(ctx, request("fp"))
			if err != nil || replay == nil || replay.Body != created.Body {
				t.Errorf("waiting duplicate: %+v, %v", replay, err)
				return
			}
			replays.Add(1)
		})
	}
	for range n {
		<-started
	}
	if err := keys.Complete(ctx, claim, created); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if replays.Load() != n {
		t.Fatalf("%d of %d duplicates replayed", replays.Load(), n)
	}
	if r, a := counted.reads.Load(), counted.appends.Load(); r != 0 || a != 2 {
		t.Fatalf("%d reads and %d appends for one claim, its outcome and %d duplicates; want 0 and 2", r, a, n)
	}
}

func TestOnlyOneOfManyClaims(t *testing.T) {
	keys, _, _ := newKeys(t)
	ctx := context.Background()
	var claims atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c, _, err := keys.Begin(ctx, request("fp"))
			switch {
			case c != nil:
				claims.Add(1)
			case !errors.Is(err, idempotency.ErrInFlight):
				t.Errorf("a loser: %v, want ErrInFlight", err)
			}
		})
	}
	wg.Wait()
	if claims.Load() != 1 {
		t.Fatalf("%d claims, want 1", claims.Load())
	}
}

func TestTakeoverAfterLeaseOrRelease(t *testing.T) {
	keys, clk, _ := newKeys(t)
	ctx := context.Background()
	first, _, err := keys.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Second) // past the lease: the holder is presumed dead
	second, _, err := keys.Begin(ctx, request("fp"))
	if err != nil || second == nil || !second.Takeover || second.OrderID != first.OrderID {
		t.Fatalf("takeover: %+v, %v (first claim %+v)", second, err, first)
	}
	// The first holder was only slow: its outcome, maybe decided on an older state of the
	// order, is not recorded, even before the taker's; the taker's stands.
	if err := keys.Complete(ctx, first, created); !errors.Is(err, idempotency.ErrTakenOver) || !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("Complete of the claim taken over: %v, want ErrTakenOver, an ErrInFlight", err)
	}
	later := idempotency.Outcome{Status: 201, Body: "later"}
	if err := keys.Complete(ctx, second, later); err != nil {
		t.Fatal(err)
	}
	if first.Sole || second.Sole || second.Prior != nil {
		t.Fatalf("Kept set on a claim taken over (%v) or a takeover (%v), or a Prior (%+v): both may have run the command", first.Sole, second.Sole, second.Prior)
	}
	_, replay, err := keys.Begin(ctx, request("fp"))
	if err != nil || replay == nil || replay.Body != later.Body {
		t.Fatalf("replay after the taker completed: %+v, %v; want the taker's", replay, err)
	}

	// The other order: the taker records first, and the slow first holder learns its outcome
	// (Prior) to answer with; or the taker releases the key, and the first records nothing
	// all the same.
	for _, taker := range []string{"completes", "releases"} {
		r := request("fp")
		r.Key = "k-" + taker
		first, _, err := keys.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(11 * time.Second)
		second, _, err := keys.Begin(ctx, r)
		if err != nil || second == nil || !second.Takeover {
			t.Fatalf("takeover of %s: %+v, %v", r.Key, second, err)
		}
		if taker == "completes" {
			err = keys.Complete(ctx, second, later)
		} else {
			err = keys.Release(ctx, second, "Service Unavailable")
		}
		if err != nil {
			t.Fatal(err)
		}
		err = keys.Complete(ctx, first, created)
		switch {
		case taker == "completes" && (err != nil || first.Prior == nil || first.Prior.Body != later.Body):
			t.Errorf("the first holder after the taker completed: %v, Prior %+v; want the taker's outcome", err, first.Prior)
		case taker == "releases" && !errors.Is(err, idempotency.ErrTakenOver):
			t.Errorf("the first holder after the taker released: %v; want ErrTakenOver", err)
		}
	}

	// A released key is taken over at once, lease or not.
	r := request("fp")
	r.Key = "k2"
	c, _, err := keys.Begin(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, c, "503"); err != nil {
		t.Fatal(err)
	}
	c2, _, err := keys.Begin(ctx, r)
	if err != nil || c2 == nil || !c2.Takeover {
		t.Fatalf("after release: %+v, %v", c2, err)
	}
}

// Another process's claim is taken over once this process has seen it unchanged for the lease,
// by its own clock, however old the claim's wall-clock times; on a sole server (the embedded
// store, locked by this process) at once, as its holder is a process that died.
func TestAnotherProcessesClaimIsTakenOverOnceSeenForALease(t *testing.T) {
	died, clk, s := newKeys(t)
	ctx := context.Background()
	if _, _, err := died.Begin(ctx, request("fp")); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Minute) // the claim's leaseUntil is long past by the wall clock: no matter
	keys := &idempotency.Keys{Store: s, TTL: died.TTL, Lease: lease.Terms{Length: 10 * time.Second, Node: "other"}, Wait: time.Millisecond, Now: clk.Now}
	if _, _, err := keys.Begin(ctx, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("first sight of another's claim: %v, want ErrInFlight", err)
	}
	clk.Add(9 * time.Second)
	if _, _, err := keys.Begin(ctx, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("seen for less than the lease: %v, want ErrInFlight", err)
	}
	clk.Add(time.Second)
	if c, _, err := keys.Begin(ctx, request("fp")); err != nil || c == nil || !c.Takeover {
		t.Fatalf("seen for the lease: %+v, %v; want a takeover", c, err)
	}

	r := request("fp")
	r.Key = "k-sole"
	if _, _, err := died.Begin(ctx, r); err != nil {
		t.Fatal(err)
	}
	sole := &idempotency.Keys{Store: s, TTL: died.TTL, Lease: lease.Terms{Length: time.Hour, Node: "other", Sole: true}, Wait: time.Millisecond, Now: clk.Now}
	if c, _, err := sole.Begin(ctx, r); err != nil || c == nil || !c.Takeover {
		t.Fatalf("on a sole server: %+v, %v; want a takeover at once", c, err)
	}
}

func TestEffectInTheOrderStreamCompletesTheRecord(t *testing.T) {
	died, clk, s := newKeys(t)
	ctx := context.Background()
	if _, _, err := died.Begin(ctx, request("fp")); err != nil {
		t.Fatal(err)
	}
	// The holder's process died after its order append: the effect is there. Another process
	// recovers it, after its first poll; its wait is long enough that a loaded machine does not
	// end it before that.
	keys := &idempotency.Keys{Store: s, TTL: died.TTL, Lease: lease.Terms{Length: died.Lease.Length, Node: "other"}, Wait: 10 * time.Second, Now: clk.Now}
	r := request("fp")
	looked := ""
	r.FindInOrderStream = func(_ context.Context, orderID string) (*idempotency.Outcome, error) {
		looked = orderID
		return &created, nil
	}
	_, replay, err := keys.Begin(ctx, r)
	if err != nil || replay == nil || replay.Body != created.Body || looked != "order-fp" {
		t.Fatalf("recovery: %+v, %v, looked in %q", replay, err, looked)
	}
	// Recorded: the next retry replays without looking.
	r.FindInOrderStream = nil
	if _, replay, err := keys.Begin(ctx, r); err != nil || replay == nil {
		t.Fatalf("after recovery: %+v, %v", replay, err)
	}
}

func TestExpiredKeyIsNew(t *testing.T) {
	keys, clk, s := newKeys(t)
	ctx := context.Background()
	c, _, err := keys.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	keys.Complete(ctx, c, created)
	clk.Add(time.Hour)
	c, replay, err := keys.Begin(ctx, request("other"))
	if err != nil || c == nil || replay != nil {
		t.Fatalf("reused after expiry: %+v, %+v, %v", c, replay, err)
	}
	n := 0
	for _, err := range s.ReadStream(ctx, c.Stream, eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("the expired key's events are still readable: %d events, want the new claim only", n)
	}
}

func first(s eventstore.Store, stream string) (eventstore.RecordedEvent, error) {
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{Limit: 1}) {
		return e, err
	}
	return eventstore.RecordedEvent{}, errors.New("empty")
}

// countingStore counts the key-stream reads and appends that reach the store.
type countingStore struct {
	eventstore.Store
	reads, appends atomic.Int64
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	c.reads.Add(1)
	return c.Store.ReadStream(ctx, stream, opts)
}

func (c *countingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	c.appends.Add(1)
	return c.Store.Append(ctx, stream, expected, events...)
}

// A new key is claimed without a read, and a completed one is replayed from memory without
// touching the store, until it expires; a node that does not remember it reads the same
// outcome from the store.
func TestCompletedKeysAreRemembered(t *testing.T) {
	keys, clk, s := newKeys(t)
	counted := &countingStore{Store: s}
	keys.Store = counted
	ctx := context.Background()
	c, _, err := keys.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if n := counted.reads.Load(); n != 0 {
		t.Fatalf("a new key's claim read the store %d times", n)
	}
	if err := keys.Complete(ctx, c, created); err != nil {
		t.Fatal(err)
	}
	reads, appends := counted.reads.Load(), counted.appends.Load()
	for range 3 {
		_, replay, err := keys.Begin(ctx, request("fp"))
		if err != nil || replay == nil || replay.Body != created.Body {
			t.Fatalf("replay: %+v, %v", replay, err)
		}
		if _, _, err := keys.Begin(ctx, request("other")); !errors.Is(err, fault.KeyReused) {
			t.Fatalf("other request: got %v, want ErrKeyReused", err)
		}
	}
	if counted.reads.Load() != reads || counted.appends.Load() != appends {
		t.Fatalf("remembered replays reached the store: %d reads, %d appends",
			counted.reads.Load()-reads, counted.appends.Load()-appends)
	}

	node2 := &idempotency.Keys{Store: s, TTL: time.Hour, Now: clk.Now, RememberBytes: -1}
	if _, replay, err := node2.Begin(ctx, request("fp")); err != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("replay on a node that does not remember: %+v, %v", replay, err)
	}

	clk.Add(time.Hour)
	if c, replay, err := keys.Begin(ctx, request("other")); err != nil || c == nil || replay != nil {
		t.Fatalf("remembered key after expiry: %+v, %+v, %v", c, replay, err)
	}
}

// A request waiting for its key's holder is woken by that key's completion, not by every
// other key this process completes meanwhile (each wake-up is a read of the store).
func TestWaitersWakeOnlyForTheirKey(t *testing.T) {
	keys, _, s := newKeys(t)
	counted := &countingStore{Store: s}
	keys.Store, keys.Wait = counted, time.Minute
	ctx := context.Background()
	held, _, err := keys.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error)
	go func() {
		_, _, err := keys.Begin(ctx, request("fp"))
		waited <- err
	}()
	const others = 200
	for i := range others {
		r := request("fp")
		r.Key = fmt.Sprint("other-", i)
		c, _, err := keys.Begin(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Complete(ctx, c, created); err != nil {
			t.Fatal(err)
		}
	}
	if err := keys.Complete(ctx, held, created); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	// Its own backoff rereads a handful of times a second at most.
	if n := counted.reads.Load(); n > others/4 {
		t.Fatalf("the waiter read its key %d times while %d other keys completed", n, others)
	}
}

// keyEvents reads the types of the key stream's events, or nil if it does not exist.
func keyEvents(t *testing.T, s eventstore.Store, r idempotency.Request) []string {
	t.Helper()
	var types []string
	for e, err := range s.ReadStream(context.Background(), idempotency.StreamName(r.Principal, r.Key), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	return types
}

// A claim left to the caller (Request.Defer) writes nothing until it is made along with the
// command's events, or recorded with its outcome; duplicates here wait for it all the same.
func TestDeferredClaim(t *testing.T) {
	ctx := context.Background()
	deferred := request("fp")
	deferred.Defer = true
	t.Run("MadeWithTheCommand", func(t *testing.T) {
		keys, _, s := newKeys(t)
		claim, _, err := keys.Begin(ctx, deferred)
		if err != nil {
			t.Fatal(err)
		}
		own, pending := claim.Append()
		if !pending || keyEvents(t, s, deferred) != nil {
			t.Fatalf("Begin with Defer: pending %v, key stream %v; want a claim pending and nothing written", pending, keyEvents(t, s, deferred))
		}
		if _, _, err := keys.Begin(ctx, deferred); !errors.Is(err, idempotency.ErrInFlight) {
			t.Fatalf("duplicate while pending: got %v, want ErrInFlight", err)
		}
		effect := eventstore.StreamAppend{Stream: "order-fp", Expected: eventstore.NoStream, Events: []eventstore.EventData{{ID: uuid.New(), Type: "order.created.v1", Data: []byte(`{}`)}}}
		results, err := s.MultiStreamAppend(ctx, own, effect)
		if err != nil {
			t.Fatal(err)
		}
		claim.Appended(ctx, results[0])
		if _, pending := claim.Append(); pending {
			t.Fatal("still pending after Made")
		}
		if err := keys.Complete(ctx, claim, created); err != nil || !claim.Sole {
			t.Fatalf("Complete: %v, kept %v", err, claim.Sole)
		}
		if got := keyEvents(t, s, deferred); fmt.Sprint(got) != fmt.Sprint([]string{idempotency.TypeClaimed, idempotency.TypeCompleted}) {
			t.Fatalf("key stream %v; want the claim and its outcome", got)
		}
	})
	t.Run("MadeWithItsOutcome", func(t *testing.T) {
		keys, _, s := newKeys(t)
		claim, _, err := keys.Begin(ctx, deferred)
		if err != nil {
			t.Fatal(err)
		}
		effect := eventstore.StreamAppend{Stream: "order-fp", Expected: eventstore.NoStream, Events: []eventstore.EventData{{ID: uuid.New(), Type: "order.created.v1", Data: []byte(`{}`)}}}
		own, pending := claim.AppendWithOutcome(created, idempotency.At{PositionStream: effect.Stream, PositionRevision: 0})
		if !pending || len(own.Events) != 1 || own.Events[0].Type != idempotency.TypeRecorded {
			t.Fatalf("PendingWith: %d events, pending %v; want one, the claim with its outcome", len(own.Events), pending)
		}
		results, err := s.MultiStreamAppend(ctx, own, effect)
		if err != nil {
			t.Fatal(err)
		}
		claim.Appended(ctx, results[0])
		if !claim.HasOutcome() || claim.Revision != 0 {
			t.Fatalf("after Made: recorded %v, revision %d; want recorded, the claim at 0", claim.HasOutcome(), claim.Revision)
		}
		answer := created
		answer.Position = results[1].Position.Commit
		if err := keys.Complete(ctx, claim, answer); err != nil || !claim.Sole {
			t.Fatalf("Complete: %v, kept %v", err, claim.Sole)
		}
		if got := keyEvents(t, s, deferred); fmt.Sprint(got) != fmt.Sprint([]string{idempotency.TypeRecorded}) {
			t.Fatalf("key stream %v; want one event, the claim with its outcome", got)
		}
		// Another node reads the outcome from the store, its position from the effect's event.
		other := &idempotency.Keys{Store: s, Now: keys.Now}
		_, replay, err := other.Begin(ctx, request("fp"))
		if err != nil || replay == nil || replay.Body != created.Body || !maps.Equal(replay.Headers, answer.Headers) || replay.Position != answer.Position {
			t.Fatalf("Begin on another node: %+v, %v; want %+v replayed", replay, err, answer)
		}
	})
	t.Run("MadeWithoutTheOutcomeAskedBefore", func(t *testing.T) {
		// A command asked for the claim with its outcome, was refused, and made the claim alone
		// at its next turn: the outcome is not recorded, and Complete records it.
		keys, _, s := newKeys(t)
		claim, _, err := keys.Begin(ctx, deferred)
		if err != nil {
			t.Fatal(err)
		}
		claim.AppendWithOutcome(created, idempotency.At{PositionStream: "order-fp"})
		own, _ := claim.Append()
		results, err := s.MultiStreamAppend(ctx, own, eventstore.StreamAppend{Stream: "order-fp", Expected: eventstore.NoStream,
			Events: []eventstore.EventData{{ID: uuid.New(), Type: "order.created.v1", Data: []byte(`{}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		claim.Appended(ctx, results[0])
		if claim.HasOutcome() || claim.Revision != 0 {
			t.Fatalf("after Made: recorded %v, revision %d; want the claim alone, at 0", claim.HasOutcome(), claim.Revision)
		}
		if err := keys.Complete(ctx, claim, created); err != nil {
			t.Fatal(err)
		}
		if got := keyEvents(t, s, deferred); fmt.Sprint(got) != fmt.Sprint([]string{idempotency.TypeClaimed, idempotency.TypeCompleted}) {
			t.Fatalf("key stream %v; want the claim and its outcome", got)
		}
	})
	t.Run("WrittenWithItsOutcome", func(t *testing.T) {
		keys, _, s := newKeys(t)
		claim, _, err := keys.Begin(ctx, deferred)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Complete(ctx, claim, created); err != nil || !claim.Sole {
			t.Fatalf("Complete: %v, kept %v", err, claim.Sole)
		}
		if got := keyEvents(t, s, deferred); fmt.Sprint(got) != fmt.Sprint([]string{idempotency.TypeRecorded}) {
			t.Fatalf("key stream %v; want one event, the claim with its outcome", got)
		}
		// Another node, which does not remember the key, reads the outcome from the store.
		other := &idempotency.Keys{Store: s, Now: keys.Now}
		if _, replay, err := other.Begin(ctx, request("fp")); err != nil || replay == nil || replay.Body != created.Body {
			t.Fatalf("Begin on another node: %+v, %v; want the outcome replayed", replay, err)
		}
	})
	t.Run("ReleasedWritesNothing", func(t *testing.T) {
		keys, _, s := newKeys(t)
		claim, _, err := keys.Begin(ctx, deferred)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Release(ctx, claim, "internal error"); err != nil {
			t.Fatal(err)
		}
		if got := keyEvents(t, s, deferred); got != nil {
			t.Fatalf("key stream %v after releasing a pending claim; want none", got)
		}
		// The key is free at once.
		if again, _, err := keys.Begin(ctx, deferred); err != nil || again == nil {
			t.Fatalf("Begin after the release: %+v, %v", again, err)
		}
	})
	t.Run("RefusedOnAKeyNotNew", func(t *testing.T) {
		// A node that has not seen the key defers its claim: made with the command's events,
		// or with an outcome, it is refused, nothing is written, and Begin without Defer
		// tells what the key holds.
		first, _, s := newKeys(t)
		claim, _, err := first.Begin(ctx, request("fp"))
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Complete(ctx, claim, created); err != nil {
			t.Fatal(err)
		}
		before := keyEvents(t, s, deferred)
		for _, other := range []string{"fp", "other"} {
			r := request(other)
			r.Defer = true
			keys := &idempotency.Keys{Store: s, Now: first.Now, Wait: first.Wait}
			c, _, err := keys.Begin(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			own, _ := c.Append()
			effect := eventstore.StreamAppend{Stream: "order-" + other, Expected: eventstore.NoStream, Events: []eventstore.EventData{{ID: uuid.New(), Type: "order.created.v1", Data: []byte(`{}`)}}}
			if _, err := s.MultiStreamAppend(ctx, own, effect); !c.Refused(err) {
				t.Errorf("%s: the claim made with the command: %v; want it refused", other, err)
			}
			err = keys.Complete(ctx, c, idempotency.Outcome{Status: 422, Body: "refused\n"})
			if !c.Refused(err) {
				t.Errorf("%s: Complete: %v; want the claim refused", other, err)
			}
			if err := keys.Release(ctx, c, "refused"); err != nil {
				t.Fatal(err)
			}
			r.Defer = false
			_, replay, err := keys.Begin(ctx, r)
			switch {
			case other == "fp" && (err != nil || replay == nil || replay.Body != created.Body):
				t.Errorf("Begin again: %+v, %v; want the first outcome", replay, err)
			case other != "fp" && !errors.Is(err, fault.KeyReused):
				t.Errorf("Begin again with another request: %v; want ErrKeyReused", err)
			}
			if got := keyEvents(t, s, deferred); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Errorf("key stream %v; want it unchanged: %v", got, before)
			}
			if _, err := collectStream(s, effect.Stream); !errors.Is(err, eventstore.ErrStreamNotFound) {
				t.Errorf("the command's stream: %v; want it not written", err)
			}
		}
	})
}

// afterARun returns the store of an earlier run of Keys, which completed k1 with created, and
// that run's Keys, for its clock.
func afterARun(t *testing.T) (*idempotency.Keys, *sqlite.Store) {
	t.Helper()
	earlier, _, s := newKeys(t)
	ctx := context.Background()
	first, _, err := earlier.Begin(ctx, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := earlier.Complete(ctx, first, created); err != nil {
		t.Fatal(err)
	}
	return earlier, s
}

// A claim pending here has not met the store: a request with another fingerprint waits for it
// instead of being refused on its word, and gets what the store says once it is settled. (A
// restart forgot key k1; a request reusing it came first; the genuine retry must get its
// replay.)
func TestRequestWaitsForAPendingClaimWhateverItsFingerprint(t *testing.T) {
	ctx := context.Background()
	earlier, s := afterARun(t)
	keys := &idempotency.Keys{Store: s, Now: earlier.Now, Wait: 50 * time.Millisecond}
	reuse := request("other")
	reuse.Defer = true
	pending, _, err := keys.Begin(ctx, reuse)
	if err != nil {
		t.Fatal(err)
	}
	retry := request("fp")
	retry.Defer = true
	if _, _, err := keys.Begin(ctx, retry); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("the retry while another request's claim is pending: %v; want ErrInFlight (it waited)", err)
	}
	// The reuse's claim is refused when it is written, and lets go.
	if err := keys.Complete(ctx, pending, idempotency.Outcome{Status: 422}); !pending.Refused(err) {
		t.Fatalf("Complete of a pending claim of k1: %v; want it refused", err)
	}
	// This process has met the key's claim now: the retry reads the key first, and gets the
	// first outcome without claiming.
	if c, replay, err := keys.Begin(ctx, retry); err != nil || c != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("the retry after: %+v, %+v, %v; want the first outcome", c, replay, err)
	}
}

func collectStream(s eventstore.Store, stream string) (n int, err error) {
	for _, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{}) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Replaying, oldest first, more keys than the memory holds reads from the store only the keys
// it no longer holds: those read do not push out the keys completed here.
func TestReplaysOfOlderKeysLeaveTheNewerRemembered(t *testing.T) {
	keys, _, s := newKeys(t)
	counted := &countingStore{Store: s}
	// Room for 8 keys completed here, and one read back.
	entry := idempotency.EntryBytes(idempotency.StreamName("shop-1", "k0"), "fp", created)
	keys.Store, keys.RememberBytes = counted, (8*entry*8+6)/7
	ctx := context.Background()
	req := func(i int) idempotency.Request {
		r := request("fp")
		r.Key = fmt.Sprint("k", i)
		return r
	}
	const n = 12 // four more than the memory holds
	for i := range n {
		c, _, err := keys.Begin(ctx, req(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Complete(ctx, c, created); err != nil {
			t.Fatal(err)
		}
	}
	before := counted.reads.Load()
	for i := range n {
		if _, replay, err := keys.Begin(ctx, req(i)); err != nil || replay == nil || replay.Body != created.Body {
			t.Fatalf("replay of key %d: %+v, %v", i, replay, err)
		}
	}
	if reads := counted.reads.Load() - before; reads != n-8 {
		t.Errorf("replaying %d keys with 8 remembered read the store %d times, want %d", n, reads, n-8)
	}
}

// A claim left pending is heard of (Keys.Log) once the store took it: with the command's
// events (Claim.Appended) or with its outcome, and never if the store refused it (a key of an
// earlier run that a restart forgot).
func TestPendingClaimIsObservedOnceMade(t *testing.T) {
	ctx := context.Background()
	earlier, s := afterARun(t)
	rec := &recorder{}
	keys := &idempotency.Keys{Store: s, Now: earlier.Now, Log: rec.logger()}
	took := rec.take
	begin := func(key string) *idempotency.Claim {
		t.Helper()
		r := request("fp")
		r.Key, r.Defer = key, true
		c, _, err := keys.Begin(ctx, r)
		if _, pending := c.Append(); err != nil || !pending {
			t.Fatalf("Begin %s with Defer: %+v, %v; want a claim pending", key, c, err)
		}
		if h := took(); len(h) != 0 {
			t.Fatalf("Begin %s with Defer: heard %v before anything was written", key, h)
		}
		return c
	}

	made := begin("k2")
	own, _ := made.Append()
	results, err := s.MultiStreamAppend(ctx, own)
	if err != nil {
		t.Fatal(err)
	}
	made.Appended(ctx, results[0])
	if err := keys.Complete(ctx, made, created); err != nil {
		t.Fatal(err)
	}
	if h := took(); !slices.Equal(h, []idempotency.Event{idempotency.EventClaimed, idempotency.EventCompleted}) {
		t.Errorf("a claim made with the command's events: heard %v", h)
	}

	if err := keys.Complete(ctx, begin("k3"), created); err != nil {
		t.Fatal(err)
	}
	if h := took(); !slices.Equal(h, []idempotency.Event{idempotency.EventClaimed, idempotency.EventCompleted}) {
		t.Errorf("a claim made with its outcome: heard %v", h)
	}

	refused := begin("k1")
	if err := keys.Complete(ctx, refused, created); !refused.Refused(err) {
		t.Fatalf("Complete of a pending claim of the earlier run's k1: %v; want it refused", err)
	}
	if h := took(); len(h) != 0 {
		t.Errorf("a refused claim: heard %v; want nothing", h)
	}
}
