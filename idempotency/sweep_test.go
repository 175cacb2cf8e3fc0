package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/prometheus/client_golang/prometheus"
)

// onePass is the log as the sweeper may use it: read, never followed.
type onePass struct {
	eventstore.Feed
	t *testing.T
}

func (f *onePass) SubscribeAll(context.Context, eventstore.SubscribeOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	f.t.Error("the sweeper subscribed to the log")
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		yield(eventstore.RecordedEvent{}, errors.New("no subscription in this test"))
	}
}

// sweeper is keys.Sweep running until the test ends.
type sweeper struct {
	feed *onePass
	// clockReads counts the reads of the keys' clock. A sweep round starts with one, and
	// nothing else reads it while the test runs no request.
	clockReads atomic.Int64
}

func startSweep(t *testing.T, keys *idempotency.Keys, feed eventstore.Feed) *sweeper {
	t.Helper()
	sw := &sweeper{feed: &onePass{Feed: feed, t: t}}
	now := keys.Now
	keys.Now = func() time.Time {
		sw.clockReads.Add(1)
		return now()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- keys.Sweep(ctx, sw.feed, 5*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Sweep: %v", err)
		}
	})
	return sw
}

// waitRound returns once a whole sweep round has run since it was called (the start of a
// second one shows that the first ended). Call it while no request runs.
func (sw *sweeper) waitRound(t *testing.T) {
	t.Helper()
	from := sw.clockReads.Load()
	waitFor(t, "a sweep round", func() bool { return sw.clockReads.Load() >= from+2 })
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func gone(s eventstore.Store, stream string) bool {
	_, err := first(s, stream)
	return errors.Is(err, eventstore.ErrStreamNotFound)
}

// claimKey claims key with fingerprint and records an outcome for it.
func claimKey(t *testing.T, keys *idempotency.Keys, key, fingerprint string) *idempotency.Claim {
	t.Helper()
	r := request(fingerprint)
	r.Key = key
	c, _, err := keys.Begin(context.Background(), r)
	if err != nil || c == nil {
		t.Fatalf("claim %s: %+v, %v", key, c, err)
	}
	if err := keys.Complete(context.Background(), c, created); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstClaim returns the fingerprint and revision of the key stream's first claim.
func firstClaim(t *testing.T, s eventstore.Store, stream string) (string, uint64) {
	t.Helper()
	e, err := first(s, stream)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	var c idempotency.Claimed
	if err := json.Unmarshal(e.Data, &c); err != nil || (e.Type != idempotency.TypeClaimed && e.Type != idempotency.TypeRecorded) {
		t.Fatalf("%s starts with %s (%v); want a claim", stream, e.Type, err)
	}
	return c.Fingerprint, e.Revision
}

// Keys claimed before the sweeper started, by an earlier run of the server, are learnt from
// one pass over the log: the expired key is swept, the young one kept, and the swept one is
// forgotten rather than read again every round.
func TestSweepDeletesKeysClaimedBeforeIt(t *testing.T) {
	earlier, clk, s := newKeys(t)
	old := claimKey(t, earlier, "old", "fp")
	clk.Add(30 * time.Minute)
	young := claimKey(t, earlier, "young", "fp")
	clk.Add(31 * time.Minute) // the first key is 61 minutes old, the second 31

	counted := &countingStore{Store: s}
	keys := &idempotency.Keys{Store: counted, TTL: time.Hour, Now: clk.Now}
	sw := startSweep(t, keys, s)
	waitFor(t, "sweep of the expired key", func() bool { return gone(s, old.Stream) })
	sw.waitRound(t)
	if gone(s, young.Stream) {
		t.Fatal("the young key was swept")
	}
	reads := counted.reads.Load()
	sw.waitRound(t)
	if n := counted.reads.Load() - reads; n != 0 {
		t.Errorf("a sweep round with nothing due read %d key streams; want none", n)
	}
	clk.Add(30 * time.Minute)
	waitFor(t, "sweep of the second key", func() bool { return gone(s, young.Stream) })
}

// A key's TTL is the one of the process that reads it: keys claimed under a TTL of an hour
// live a day once the TTL is raised to a day, for requests and for the sweep alike, and a key
// claimed before is replayed rather than claimed anew.
func TestKeysLiveByTheTTLOfTheirReader(t *testing.T) {
	earlier, clk, s := newKeys(t) // TTL: an hour
	c := claimKey(t, earlier, "k1", "fp")
	if err := earlier.Complete(t.Context(), c, created); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Hour)

	keys := &idempotency.Keys{Store: s, TTL: 24 * time.Hour, Now: clk.Now, RememberBytes: -1}
	sw := startSweep(t, keys, s)
	sw.waitRound(t)
	if gone(s, c.Stream) {
		t.Fatal("a key younger than the TTL was swept")
	}
	if _, replay, err := keys.Begin(t.Context(), request("fp")); err != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("a request two hours after its key's claim, under a TTL of a day: %+v, %v; want the replay", replay, err)
	}
	clk.Add(22 * time.Hour)
	waitFor(t, "sweep of the key a day old", func() bool { return gone(s, c.Stream) })
}

// Keys claimed after the sweeper started are swept once they expire, not before.
func TestSweepDeletesKeysClaimedAfterItStarts(t *testing.T) {
	keys, clk, s := newKeys(t)
	sw := startSweep(t, keys, s)
	sw.waitRound(t) // past the walk over the log
	c := claimKey(t, keys, "k1", "fp")
	clk.Add(59 * time.Minute)
	sw.waitRound(t)
	if gone(s, c.Stream) {
		t.Fatal("the key was swept before its expiry")
	}
	clk.Add(time.Minute)
	waitFor(t, "sweep of the expired key", func() bool { return gone(s, c.Stream) })
}

// A key that Begin expired and claimed anew lives to its new expiry, not its old one.
func TestSweepSparesAKeyClaimedAnew(t *testing.T) {
	keys, clk, s := newKeys(t)
	sw := startSweep(t, keys, s)
	claimKey(t, keys, "k1", "fp")
	clk.Add(time.Hour)
	again := claimKey(t, keys, "k1", "other")
	sw.waitRound(t)
	if fp, rev := firstClaim(t, s, again.Stream); fp != "other" || rev != again.Revision {
		t.Fatalf("the key's stream starts with the claim of %q@%d; want the new claim, %q@%d", fp, rev, "other", again.Revision)
	}
	clk.Add(time.Hour)
	waitFor(t, "sweep of the key's second life", func() bool { return gone(s, again.Stream) })
}

// interposed runs between, once, before the first stream delete that reaches it: a request
// slipping in between the sweeper's read of an expired key and its delete.
type interposed struct {
	eventstore.Store
	between  func()
	started  atomic.Bool
	firstErr chan error // what the delete after between returned
}

func (s *interposed) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if !s.started.CompareAndSwap(false, true) {
		return s.Store.DeleteStream(ctx, stream, expected)
	}
	s.between()
	err := s.Store.DeleteStream(ctx, stream, expected)
	s.firstErr <- err
	return err
}

// A key claimed anew between the sweeper's read of it, expired, and its delete is left alone:
// the delete expects the revision read.
func TestSweepLeavesAKeyChangedBeforeItsDelete(t *testing.T) {
	keys, clk, s := newKeys(t)
	old := claimKey(t, keys, "k1", "fp")
	clk.Add(time.Hour)
	var again *idempotency.Claim
	var againErr error
	store := &interposed{Store: s, firstErr: make(chan error, 1)}
	store.between = func() { again, _, againErr = keys.Begin(context.Background(), request("other")) }
	keys.Store = store
	sw := startSweep(t, keys, s)

	var err error
	select {
	case err = <-store.firstErr:
	case <-time.After(10 * time.Second):
		t.Fatal("the sweeper deleted nothing in 10s")
	}
	if againErr != nil || again == nil {
		t.Fatalf("the request in between: %+v, %v; want a new claim", again, againErr)
	}
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("the sweeper's delete: %v; want ErrWrongExpectedRevision", err)
	}
	sw.waitRound(t)
	if fp, rev := firstClaim(t, s, old.Stream); fp != "other" || rev != again.Revision {
		t.Fatalf("the key's stream starts with the claim of %q@%d; want the new claim, %q@%d", fp, rev, "other", again.Revision)
	}
}

// With a sweeper, a key it knows was claimed is read before anything else: the retry of a key
// that memory no longer holds (an earlier run's, here) gets its replay without a claim, left
// pending or not, and so without its command being run again only to be refused. A key it does
// not know is new: its claim is left to the caller.
func TestKnownKeyIsReadFirst(t *testing.T) {
	ctx := context.Background()
	earlier, _, s := newKeys(t)
	claimKey(t, earlier, "k1", "fp")
	keys := &idempotency.Keys{Store: s, Now: earlier.Now, RememberBytes: -1}
	startSweep(t, keys, s).waitRound(t) // its pass over the log is done

	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	retry := request("fp")
	retry.Defer = true
	if c, replay, err := keys.Begin(ctx, retry); err != nil || c != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("the retry of a known key: claim %+v, replay %+v, %v; want the replay", c, replay, err)
	}
	if now, _ := s.Head(ctx); now != head {
		t.Errorf("the log moved from %v to %v for a replay", head, now)
	}
	fresh := request("fp")
	fresh.Key, fresh.Defer = "k2", true
	c, _, err := keys.Begin(ctx, fresh)
	if err != nil || c == nil {
		t.Fatalf("a new key: %+v, %v", c, err)
	}
	if _, pending := c.Append(); !pending {
		t.Error("a new key's claim was written at once; want it left pending")
	}
}

// The sweeper holds no entry per live key beyond a table of fixed size, however many keys
// live, and still sweeps each key once its TTL has passed, in the order they expire.
func TestSweeperMemoryDoesNotGrowWithLiveKeys(t *testing.T) {
	keys, clk, s := newKeys(t)
	const slots = 32
	keys.SetKnownSlots(slots)
	sw := startSweep(t, keys, s)
	sw.waitRound(t)
	var early, late []string
	for i := range 150 {
		if i == 100 {
			clk.Add(30 * time.Minute)
		}
		c := claimKey(t, keys, fmt.Sprint("k", i), "fp")
		if i < 100 {
			early = append(early, c.Stream)
		} else {
			late = append(late, c.Stream)
		}
	}
	if n := keys.SweeperEntries(); n > slots {
		t.Fatalf("the sweeper holds %d keys in memory with 150 live; want at most %d", n, slots)
	}
	clk.Add(30 * time.Minute) // the first 100 keys expire
	waitFor(t, "sweep of the keys claimed first", func() bool { return gone(s, early[len(early)-1]) })
	for _, stream := range early {
		if !gone(s, stream) {
			t.Errorf("%s, expired, was not swept", stream)
		}
	}
	sw.waitRound(t)
	for _, stream := range late {
		if gone(s, stream) {
			t.Fatalf("%s was swept before its expiry", stream)
		}
	}
	clk.Add(30 * time.Minute)
	waitFor(t, "sweep of the keys claimed later", func() bool { return gone(s, late[len(late)-1]) })
	for _, stream := range late {
		if !gone(s, stream) {
			t.Errorf("%s, expired, was not swept", stream)
		}
	}
}

// failingDeletes refuses every stream delete while failing is set, as a full disk would.
type failingDeletes struct {
	eventstore.Store
	failing atomic.Bool
}

var errDiskFull = errors.New("database or disk is full")

func (s *failingDeletes) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if s.failing.Load() {
		return errDiskFull
	}
	return s.Store.DeleteStream(ctx, stream, expected)
}

// A sweeper whose store fails keeps trying, reports each failure and, once it has failed
// several times in a row, that it cannot sweep; when the store works again it sweeps, and
// reports nothing any more.
func TestSweeperRetriesAfterStoreErrors(t *testing.T) {
	keys, clk, s := newKeys(t)
	c := claimKey(t, keys, "k1", "fp")
	clk.Add(time.Hour)
	store := &failingDeletes{Store: s}
	store.failing.Store(true)
	keys.Store = store
	reg := prometheus.NewRegistry()
	keys.Steps = idempotency.NewSteps(reg)
	startSweep(t, keys, s)
	waitFor(t, "the sweeper to report failing", func() bool { return keys.SweepErr() != nil })
	if err := keys.SweepErr(); !errors.Is(err, errDiskFull) {
		t.Errorf("SweepErr: %v; want the store's error", err)
	}
	if n := sweepFailures(t, reg); n < 3 {
		t.Errorf("%v failures counted before the sweeper reported failing; want 3", n)
	}
	if gone(s, c.Stream) {
		t.Fatal("the key was swept while deletes failed")
	}

	store.failing.Store(false)
	waitFor(t, "sweep of the expired key after the store recovered", func() bool { return gone(s, c.Stream) })
	waitFor(t, "the sweeper to report working", func() bool { return keys.SweepErr() == nil })
}

// sweepFailures is orders_idempotency_sweep_failures_total in reg.
func sweepFailures(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "orders_idempotency_sweep_failures_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no orders_idempotency_sweep_failures_total")
	return 0
}
