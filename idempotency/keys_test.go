package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/lease"
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

// request is a request with the key k1.
func request(fingerprint string) idempotency.Request {
	return idempotency.Request{
		Principal: "shop-1", Key: "k1", Method: "POST", Path: "/v1/orders", Fingerprint: fingerprint,
		OrderID: "order-" + fingerprint, Claimant: "test/r",
	}
}

// begin is Begin with the claim written at once, as on a store that writes claims first; a
// claim the store refuses begins again, reading the key first.
func begin(ctx context.Context, k *idempotency.Keys, r idempotency.Request) (*idempotency.Claim, *idempotency.Outcome, error) {
	c, out, err := k.Begin(ctx, r)
	if c == nil {
		return c, out, err
	}
	if err := k.WriteClaim(ctx, c); err != nil {
		k.Drop(c)
		if c.Refused(err) {
			r.ReadFirst = true
			return begin(ctx, k, r)
		}
		return nil, nil, err
	}
	return c, nil, nil
}

var created = idempotency.Outcome{Status: 201, Headers: map[string]string{"Location": "/v1/orders/x"}, Body: "{\"id\":\"x\"}\n"}

func TestClaimCompleteReplay(t *testing.T) {
	keys, _, _ := newKeys(t)
	ctx := context.Background()
	claim, replay, err := begin(ctx, keys, request("fp"))
	if err != nil || replay != nil || claim == nil || claim.OrderID != "order-fp" || claim.Takeover {
		t.Fatalf("first Begin: %+v, %+v, %v", claim, replay, err)
	}
	// Held, not done: a duplicate waits its bound, then hears the key is in flight.
	if _, _, err := begin(ctx, keys, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("duplicate while held: got %v, want ErrInFlight", err)
	}
	// So does a request with another body: the holder's write tells what the key holds.
	if _, _, err := begin(ctx, keys, request("other")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("other request while held: got %v, want ErrInFlight", err)
	}
	if err := keys.Complete(ctx, claim, created); err != nil || !claim.Sole {
		t.Fatalf("Complete: %v, kept %v", err, claim.Sole)
	}
	_, replay, err = begin(ctx, keys, request("fp"))
	if err != nil || replay == nil || replay.Body != created.Body || replay.Status != 201 || replay.Headers["Location"] != "/v1/orders/x" {
		t.Fatalf("after completion: %+v, %v", replay, err)
	}
	if _, _, err := begin(ctx, keys, request("other")); !errors.Is(err, fault.KeyReused) {
		t.Fatalf("other request after completion: got %v, want ErrKeyReused", err)
	}
	other := request("fp")
	other.Principal = "shop-2"
	if c, _, err := begin(ctx, keys, other); err != nil || c == nil {
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
	claim, _, err := begin(context.Background(), keys, request("fp"))
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
			_, replay, err := begin(ctx, keys, request("fp"))
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
			c, _, err := begin(ctx, keys, request("fp"))
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
	first, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Second) // past the lease: the holder is presumed dead
	keys.Drop(first)          // as its hold ends with its request
	second, _, err := begin(ctx, keys, request("fp"))
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
	_, replay, err := begin(ctx, keys, request("fp"))
	if err != nil || replay == nil || replay.Body != later.Body {
		t.Fatalf("replay after the taker completed: %+v, %v; want the taker's", replay, err)
	}

	// The other order: the taker records first, and the slow first holder learns its outcome
	// (Prior) to answer with; or the taker releases the key, and the first records nothing
	// all the same.
	for _, taker := range []string{"completes", "releases"} {
		r := request("fp")
		r.Key = "k-" + taker
		first, _, err := begin(ctx, keys, r)
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(11 * time.Second)
		keys.Drop(first)
		second, _, err := begin(ctx, keys, r)
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
	c, _, err := begin(ctx, keys, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, c, "503"); err != nil {
		t.Fatal(err)
	}
	c2, _, err := begin(ctx, keys, r)
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
	if _, _, err := begin(ctx, died, request("fp")); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Minute) // the claim's leaseUntil is long past by the wall clock: no matter
	keys := &idempotency.Keys{Store: s, TTL: died.TTL, Lease: lease.Terms{Length: 10 * time.Second, Node: "other"}, Wait: time.Millisecond, Now: clk.Now}
	if _, _, err := begin(ctx, keys, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("first sight of another's claim: %v, want ErrInFlight", err)
	}
	clk.Add(9 * time.Second)
	if _, _, err := begin(ctx, keys, request("fp")); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("seen for less than the lease: %v, want ErrInFlight", err)
	}
	clk.Add(time.Second)
	if c, _, err := begin(ctx, keys, request("fp")); err != nil || c == nil || !c.Takeover {
		t.Fatalf("seen for the lease: %+v, %v; want a takeover", c, err)
	}

	r := request("fp")
	r.Key = "k-sole"
	if _, _, err := begin(ctx, died, r); err != nil {
		t.Fatal(err)
	}
	sole := &idempotency.Keys{Store: s, TTL: died.TTL, Lease: lease.Terms{Length: time.Hour, Node: "other", Sole: true}, Wait: time.Millisecond, Now: clk.Now}
	if c, _, err := begin(ctx, sole, r); err != nil || c == nil || !c.Takeover {
		t.Fatalf("on a sole server: %+v, %v; want a takeover at once", c, err)
	}
}

func TestExpiredKeyIsNew(t *testing.T) {
	keys, clk, s := newKeys(t)
	ctx := context.Background()
	c, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	keys.Complete(ctx, c, created)
	clk.Add(time.Hour)
	c, replay, err := begin(ctx, keys, request("other"))
	if err != nil || c == nil || replay != nil {
		t.Fatalf("reused after expiry: %+v, %+v, %v", c, replay, err)
	}
	other := idempotency.Outcome{Status: 201, Body: "other"}
	if err := keys.Complete(ctx, c, other); err != nil {
		t.Fatal(err)
	}
	node2 := &idempotency.Keys{Store: s, TTL: keys.TTL, Now: clk.Now}
	again := request("other")
	again.ReadFirst = true
	if _, replay, err := node2.Begin(ctx, again); err != nil || replay == nil || replay.Body != other.Body {
		t.Fatalf("the key in its new life, read from the store: %+v, %v; want its new outcome", replay, err)
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

func (c *countingStore) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	c.appends.Add(1)
	return c.Store.(eventstore.MultiStreamAppender).MultiStreamAppend(ctx, appends...)
}

// A new key is claimed without a read, and a completed one is replayed from memory without
// touching the store, until it expires; a node that does not remember it reads the same
// outcome from the store.
func TestCompletedKeysAreRemembered(t *testing.T) {
	keys, clk, s := newKeys(t)
	counted := &countingStore{Store: s}
	keys.Store = counted
	ctx := context.Background()
	c, _, err := begin(ctx, keys, request("fp"))
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
		_, replay, err := begin(ctx, keys, request("fp"))
		if err != nil || replay == nil || replay.Body != created.Body {
			t.Fatalf("replay: %+v, %v", replay, err)
		}
		if _, _, err := begin(ctx, keys, request("other")); !errors.Is(err, fault.KeyReused) {
			t.Fatalf("other request: got %v, want ErrKeyReused", err)
		}
	}
	if counted.reads.Load() != reads || counted.appends.Load() != appends {
		t.Fatalf("remembered replays reached the store: %d reads, %d appends",
			counted.reads.Load()-reads, counted.appends.Load()-appends)
	}

	node2 := &idempotency.Keys{Store: s, TTL: time.Hour, Now: clk.Now, RememberBytes: -1}
	if _, replay, err := begin(ctx, node2, request("fp")); err != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("replay on a node that does not remember: %+v, %v", replay, err)
	}

	clk.Add(time.Hour)
	if c, replay, err := begin(ctx, keys, request("other")); err != nil || c == nil || replay != nil {
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
	held, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error)
	go func() {
		_, _, err := begin(ctx, keys, request("fp"))
		waited <- err
	}()
	const others = 200
	for i := range others {
		r := request("fp")
		r.Key = fmt.Sprint("other-", i)
		c, _, err := begin(ctx, keys, r)
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

// afterARun returns the store of an earlier run of Keys, which completed k1 with created, and
// that run's Keys, for its clock.
func afterARun(t *testing.T) (*idempotency.Keys, *sqlite.Store) {
	t.Helper()
	earlier, _, s := newKeys(t)
	ctx := context.Background()
	first, _, err := begin(ctx, earlier, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := earlier.Complete(ctx, first, created); err != nil {
		t.Fatal(err)
	}
	return earlier, s
}

// A claim held here has not met the store: a request with another fingerprint waits for it
// instead of being refused on its word, and gets what the store says once it is settled. (A
// restart forgot key k1; a request reusing it came first; the genuine retry must get its
// replay.)
func TestRequestWaitsForAClaimHeldHereWhateverItsFingerprint(t *testing.T) {
	ctx := context.Background()
	earlier, s := afterARun(t)
	keys := &idempotency.Keys{Store: s, Now: earlier.Now, Wait: 50 * time.Millisecond}
	held, _, err := keys.Begin(ctx, request("other")) // a key this process does not know is taken for new
	if err != nil || held == nil {
		t.Fatalf("Begin of the reuse: %+v, %v; want a claim", held, err)
	}
	retry := request("fp")
	if _, _, err := keys.Begin(ctx, retry); !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("the retry while another request holds the key here: %v; want ErrInFlight (it waited)", err)
	}
	// The reuse's claim is refused when it is written, and lets go.
	if err := keys.WriteClaim(ctx, held); !held.Refused(err) {
		t.Fatalf("WriteClaim of a claim of k1 taken for new: %v; want it refused", err)
	}
	keys.Drop(held)
	retry.ReadFirst = true
	if c, replay, err := keys.Begin(ctx, retry); err != nil || c != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("the retry after: %+v, %+v, %v; want the first outcome", c, replay, err)
	}
}

// A key completed here whose outcome the memory pushed out is still known: its retry reads the
// key and replays it, without claiming it first, for a claim the store would refuse.
func TestKnownKeyIsReadBeforeItsClaim(t *testing.T) {
	keys, _, s := newKeys(t)
	// A few answers, and a table of 1,024 keys, in which none of these 200 takes the slot of
	// k-0 (a slot follows from the key stream's name).
	keys.RememberBytes = 64 << 10
	counted := &countingStore{Store: s}
	keys.Store = counted
	ctx := context.Background()
	for i := range 200 {
		r := request("fp")
		r.Key = fmt.Sprint("k-", i)
		c, _, err := begin(ctx, keys, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := keys.Complete(ctx, c, outcomeOf(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	appends := counted.appends.Load()
	r := request("fp")
	r.Key = "k-0" // its outcome long pushed out of memory
	c, replay, err := keys.Begin(ctx, r)
	if err != nil || c != nil || replay == nil {
		t.Fatalf("retry of a key completed here and forgotten: claim %+v, replay %v, %v; want the replay", c, replay != nil, err)
	}
	if n := counted.appends.Load() - appends; n != 0 {
		t.Errorf("the retry appended %d times; want none", n)
	}
}
