package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

func orderEvent(seq uint64, principal string) eventstore.RecordedEvent {
	md, _ := json.Marshal(command.Metadata{Principal: principal})
	return eventstore.RecordedEvent{ID: uuid.New(), Stream: command.StreamName("o1"), Type: "order.created.v1",
		Position: eventstore.Position{Commit: seq, Prepare: seq}, Metadata: md}
}

// The tail takes a runner only once it has read at or past the last event handed out; it hands
// a follower only its principal's events, at most its buffer's worth, and drops it past that.
func TestTailJoinsRunnersCaughtUpAndDropsFullOnes(t *testing.T) {
	var tl tail
	ep := Endpoint{ID: "we_a", Principal: "shop", Events: []string{AllEvents}}
	at := func(seq uint64) eventstore.Position { return eventstore.Position{Commit: seq, Prepare: seq} }
	if tl.join(ep, eventstore.Start, 0) != nil {
		t.Error("a buffer of 0 joined")
	}
	f := tl.join(ep, eventstore.Start, 2) // nothing handed out yet: any cursor joins
	tl.hand(orderEvent(1, "shop"), "shop")
	tl.hand(orderEvent(2, "other"), "other")
	if tl.join(ep, at(1), 2) != nil {
		t.Error("a runner behind the last event handed out joined")
	}
	ds, cursor, ok := tl.take(f, 5)
	if !ok || len(ds) != 1 || ds[0].Position != at(1) || cursor != at(2) {
		t.Errorf("take: %v %v %v", ds, cursor, ok)
	}
	tl.hand(orderEvent(3, "shop"), "shop")
	tl.hand(orderEvent(4, "shop"), "shop")
	if ds, cursor, ok = tl.take(f, 1); !ok || len(ds) != 1 || cursor != at(3) {
		t.Errorf("take with room for one: %v %v %v", ds, cursor, ok)
	}
	tl.hand(orderEvent(5, "shop"), "shop")
	tl.hand(orderEvent(6, "shop"), "shop") // a third in a buffer of two
	if _, _, ok = tl.take(f, 5); ok {
		t.Error("a follower with a full buffer was not dropped")
	}
	if n, drops := tl.counts(); n != 0 || drops != 1 {
		t.Errorf("%d following, %d dropped", n, drops)
	}
	g := tl.join(ep, at(6), 2)
	tl.leave(g)
	if n, _ := tl.counts(); g == nil || n != 0 {
		t.Errorf("join at the last event: %v; %d following after leaving", g, n)
	}
}

// CountingFeed counts the events runners read from the log on their own. It is exported for
// the benchmarks of package webhooks_test too.
type CountingFeed struct {
	eventstore.Feed
	Read atomic.Int64
}

func (c *CountingFeed) ReadAll(ctx context.Context, opts eventstore.ReadAllOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		for e, err := range c.Feed.ReadAll(ctx, opts) {
			c.Read.Add(1)
			if !yield(e, err) {
				return
			}
		}
	}
}

// receiver records the deliveries of every endpoint (its path names the endpoint); requests
// to /slow wait until release is closed.
type receiver struct {
	mu      sync.Mutex
	got     map[string][]Payload // by path
	release chan struct{}
	once    sync.Once
}

func (rc *receiver) open() { rc.once.Do(func() { close(rc.release) }) }

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/slow" {
		<-rc.release
	}
	var b Payload
	raw, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(raw, &b); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got[r.URL.Path] = append(rc.got[r.URL.Path], b)
}

// check reports whether path received n distinct events, each order's in revision order.
func (rc *receiver) check(path string, n int) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ids, last := map[string]bool{}, map[string]uint64{}
	for _, b := range rc.got[path] {
		if r, ok := last[b.OrderID]; ok && b.Revision < r {
			return fmt.Errorf("%s: order %s revision %d after %d", path, b.OrderID, b.Revision, r)
		}
		ids[b.ID], last[b.OrderID] = true, b.Revision
	}
	if len(ids) != n {
		return fmt.Errorf("%s: %d of %d events", path, len(ids), n)
	}
	return nil
}

// startTailService registers an endpoint per path for principal shop and runs the deliveries.
func startTailService(t *testing.T, cfg Config, paths []string) (*Service, *sqlite.Store, *CountingFeed, *receiver) {
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rc := &receiver{got: map[string][]Payload{}, release: make(chan struct{})}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	t.Cleanup(rc.open)
	cfg.AllowPrivate, cfg.SingleNode = true, true
	sealer, _ := NewSealer(make([]byte, 32))
	feed := &CountingFeed{Feed: store}
	s := &Service{Store: store, Feed: feed, Config: &cfg, Node: "n", Log: slog.New(slog.DiscardHandler),
		Endpoints: &Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	for _, p := range paths {
		if _, err := register(ctx, s.Endpoints, "shop", "key-"+p, srv.URL+p, []string{AllEvents}, ""); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, store, feed, rc
}

// appendShopOrders appends orders of principal shop, 5 events each (created, 4 lines), n events
// in all, and returns how many.
func appendShopOrders(t *testing.T, store eventstore.Store, from, n int) int {
	md, _ := json.Marshal(command.Metadata{Principal: "shop", Command: "test", At: time.Now()})
	for i := from; i < from+n; i += 5 {
		id := fmt.Sprintf("order-%07d", i)
		evs := []order.Event{order.Created{OrderID: id, CustomerID: "c", Currency: "EUR", At: time.Now()}}
		for j := 1; j < 5; j++ {
			evs = append(evs, order.LineAdded{SKU: fmt.Sprint("sku-", j), Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}, At: time.Now()})
		}
		var data []eventstore.EventData
		for _, e := range evs {
			typ, raw, _ := order.Marshal(e)
			data = append(data, eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: typ, Data: raw, Metadata: md})
		}
		if _, err := store.Append(context.Background(), command.StreamName(id), eventstore.NoStream, data...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
	}
}

// Many endpoints follow the node's one reader of the log: once they have caught up, the events
// appended after reach all of them without any runner reading the log itself.
func TestManyEndpointsShareOneReader(t *testing.T) {
	var paths []string
	for i := range 10 {
		paths = append(paths, fmt.Sprintf("/e%d", i))
	}
	s, store, feed, rc := startTailService(t, DefaultConfig(), paths)
	eventually(t, "every runner follows the reader", func() bool { n, _ := s.tail.counts(); return n == len(paths) })
	before := feed.Read.Load()
	n := appendShopOrders(t, store, 0, 100)
	for _, p := range paths {
		eventually(t, "every event delivered to "+p, func() bool { return rc.check(p, n) == nil })
	}
	if read := feed.Read.Load() - before; read != 0 {
		t.Errorf("runners read %d events of the log themselves; want 0 (%d events to %d endpoints)", read, n, len(paths))
	}
	if following, drops := s.tail.counts(); following != len(paths) || drops != 0 {
		t.Errorf("%d following, %d dropped", following, drops)
	}
}

// An endpoint that does not answer fills its buffer in the tail and is dropped from it; the
// others go on receiving from the reader. Once it answers, its runner reads the log on its own
// from its cursor, delivers every event in order per order, and follows the reader again.
func TestSlowEndpointFallsBackAndCatchesUp(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight, cfg.MaxPending, cfg.TailBuffer = 2, 8, 4
	cfg.Timeout = time.Minute
	paths := []string{"/fast1", "/fast2", "/slow"}
	s, store, _, rc := startTailService(t, cfg, paths)
	eventually(t, "every runner follows the reader", func() bool { n, _ := s.tail.counts(); return n == len(paths) })
	n := 0
	for range 20 { // one order at a time, so that a fast runner takes each before the next
		n += appendShopOrders(t, store, n, 5)
		time.Sleep(time.Millisecond)
	}
	for _, p := range paths[:2] {
		eventually(t, "every event delivered to "+p, func() bool { return rc.check(p, n) == nil })
	}
	if _, drops := s.tail.counts(); drops == 0 || !strings.Contains(rc.check("/slow", n).Error(), "of 100") {
		t.Fatalf("slow endpoint not dropped (%d drops) or not held up: %v", drops, rc.check("/slow", n))
	}
	rc.open()
	eventually(t, "every event delivered to /slow", func() bool { return rc.check("/slow", n) == nil })
	eventually(t, "the slow runner follows the reader again", func() bool { n, _ := s.tail.counts(); return n == len(paths) })
}

// A runner behind reads ahead only what keeps its attempts busy: with 2 attempts in flight that
// do not answer, its checkpoint holds 16 of the 100 events, not all of them; the rest waits in
// the log and is delivered, in order per order, once the receiver answers.
func TestRunnerReadsAheadOnlyWhatKeepsItsAttemptsBusy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxInFlight, cfg.Timeout = 2, time.Minute
	s, store, _, rc := startTailService(t, cfg, []string{"/slow"})
	n := appendShopOrders(t, store, 0, 100)
	id := s.Endpoints.List("", true)[0].ID
	pending := func() int { p, _ := s.Pending(context.Background(), id); return len(p) }
	eventually(t, "16 deliveries pending", func() bool { return pending() == readAhead*cfg.MaxInFlight })
	time.Sleep(100 * time.Millisecond)
	if p := pending(); p != readAhead*cfg.MaxInFlight {
		t.Errorf("%d deliveries pending with 2 in flight, want %d", p, readAhead*cfg.MaxInFlight)
	}
	rc.open()
	eventually(t, "every event delivered", func() bool { return rc.check("/slow", n) == nil })
}
