package tests

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Rebuilds of the read models while the service serves, and crashes (SIGKILL) in the middle
// of a rebuild or of a burst of commands: afterwards every row of the orders read model is its
// order's events folded, each order once.

// bigOrder is an order of n lines, one event each: a few of them make a log of thousands of
// events without thousands of requests.
func bigOrder(customer string, n int) newOrder {
	o := newOrder{CustomerID: customer, Currency: "EUR"}
	for i := range n {
		o.Lines = append(o.Lines, line{SKU: fmt.Sprintf("bulk-%03d", i), Quantity: int64(1 + i%3), UnitPrice: int64(100 + i)})
	}
	return o
}

// createAll creates the orders bodies[i] with keys prefix-i, a few at a time, and returns
// their ids in the same order.
func (s *server) createAll(t *testing.T, prefix string, bodies []newOrder) []string {
	t.Helper()
	out := make([]string, len(bodies))
	errs := make([]error, len(bodies))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return
				}
				r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: fmt.Sprintf("%s-%d", prefix, i), body: bodies[i]})
				switch {
				case err != nil:
					errs[i] = err
				case r.status != http.StatusCreated || r.str("id") == "":
					errs[i] = fmt.Errorf("%v; want 201", r)
				default:
					out[i] = r.str("id")
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// maxDuration is the longest of durations noted from several goroutines.
type maxDuration struct {
	mu sync.Mutex
	d  time.Duration
}

func (m *maxDuration) note(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.d = max(m.d, d)
}

func (m *maxDuration) get() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.d
}

// folded is what an order's events say about it.
type folded struct {
	status  string
	total   int64
	paid    int64
	lines   int
	version int64
}

// fold folds the events of an order by their types and data, independently of the server's
// own fold.
func fold(evs []event) folded {
	type ln struct{ qty, price int64 }
	lines := map[string]ln{}
	var f folded
	for _, e := range evs {
		sku, _ := e.Data["sku"].(string)
		switch e.Type {
		case "order.created.v2":
			f.status = "created"
		case "order.line-added.v2":
			price, _ := e.Data["unitPrice"].(map[string]any)
			l := lines[sku]
			l.qty += jsonInt(e.Data["quantity"])
			l.price = jsonInt(price["amount"])
			lines[sku] = l
		case "order.line-quantity-changed.v1":
			l := lines[sku]
			l.qty = jsonInt(e.Data["quantity"])
			lines[sku] = l
		case "order.line-removed.v1":
			delete(lines, sku)
		case "order.payment-started.v1":
			f.status = "paying"
		case "order.payment-confirmed.v1":
			amount, _ := e.Data["amount"].(map[string]any)
			f.status, f.paid = "paid", jsonInt(amount["amount"])
		case "order.payment-failed.v1":
			f.status = "created"
		case "order.cancelled.v1":
			f.status = "cancelled"
		case "order.shipped.v1":
			f.status = "shipped"
		case "order.refund-requested.v1":
			f.status = "refunding"
		case "order.refund-completed.v1":
			f.status = "refunded"
		}
	}
	for _, l := range lines {
		f.total += l.qty * l.price
	}
	f.lines, f.version = len(lines), int64(len(evs))
	return f
}

// checkRowsAreFolds reports on t unless every listed order is its events folded: status,
// total, paid, lines and version (the number of events: none applied twice, none skipped).
func (s *server) checkRowsAreFolds(t *testing.T, orders []listedOrder) {
	t.Helper()
	for _, o := range orders {
		want := fold(s.events(t, o.ID))
		lines, _ := o.Raw["lines"].([]any)
		got := folded{status: o.Status, total: o.Total, paid: jsonInt(o.Raw["paid"]), lines: len(lines), version: o.Version}
		if got != want {
			t.Errorf("order %s in the read model: %+v; its events fold to %+v", o.ID, got, want)
		}
	}
}

// checkListing reports on t unless the listing of every order holds exactly the ids, once each.
func checkListing(t *testing.T, listed []listedOrder, want []string) {
	t.Helper()
	got := ids(listed)
	checkNewestFirst(t, "listing", got)
	if !sameSet(got, want) {
		var missing, extra []string
		for _, id := range want {
			if !slices.Contains(got, id) {
				missing = append(missing, id)
			}
		}
		for _, id := range got {
			if !slices.Contains(want, id) {
				extra = append(extra, id)
			}
		}
		t.Errorf("listing has %d orders, want %d: missing %v, unexpected %v", len(got), len(want), missing, extra)
	}
}

// seedLog creates a log of a few thousand events: big orders of 100 lines, and small ones of
// which some are paid and some cancelled. It returns the ids of every order.
func (s *server) seedLog(t *testing.T, big, small int) []string {
	t.Helper()
	var bodies []newOrder
	for i := range big {
		bodies = append(bodies, bigOrder(fmt.Sprintf("c-big-%d", i%3), 100))
	}
	for i := range small {
		bodies = append(bodies, orderFor(fmt.Sprintf("c-small-%d", i%3)))
	}
	created := s.createAll(t, "seed", bodies)
	for i, id := range created[big:] {
		switch i % 3 {
		case 1:
			s.pay(t, id, fmt.Sprintf("pay-seed-%d", i))
		case 2:
			s.command(t, id, "/cancel", fmt.Sprintf("seed-cancel-%d", i), map[string]any{"reason": "seed"})
		}
	}
	return created
}

// requestRebuild asks for a rebuild of projection name and expects 202.
func (s *server) requestRebuild(t testing.TB, name string) {
	t.Helper()
	r := s.do(t, "POST", "/admin/projections/"+name+"/rebuild", "", nil)
	wantStatus(t, r, http.StatusAccepted)
	if r.str("status") != "rebuilding" {
		t.Errorf("%v; want status rebuilding", r)
	}
}

func TestRebuildWhileServing(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	// About 1,250 events, enough for the rebuild to overlap the traffic below. The runner
	// applies no live event while a rebuild step runs, so a query waits for the step to end:
	// with a few thousand events in one step, under -race on a busy machine, that wait can pass
	// the 2 s bound of a query and the query fails with 503.
	created := s.seedLog(t, 12, 15)
	before := s.waitProjections(t, "caught up", caughtUp)

	var mu sync.Mutex
	var slowestRead, slowestListing maxDuration
	acked := slices.Clone(created) // every order acknowledged so far
	ackedNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(acked)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // creates orders until stopped
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: fmt.Sprintf("during-%d", i), body: orderFor("c-during")})
			if err != nil || r.status != http.StatusCreated {
				t.Errorf("create during the rebuild: %v %v", r, err)
				return
			}
			id := r.str("id")
			mu.Lock()
			acked = append(acked, id)
			mu.Unlock()
			// Read-your-writes holds during the rebuild too.
			start := time.Now()
			read, err := s.send(t, request{method: "GET", path: "/v1/orders/" + id})
			slowestRead.note(time.Since(start))
			if err != nil || read.status != http.StatusOK || read.num("version") != r.num("version") {
				t.Errorf("read right after creating %s during the rebuild: %v %v; want it at version %d", id, read, err, r.num("version"))
				return
			}
		}
	})
	var listings, keyReads atomic.Int64
	wg.Go(func() { // lists every order until stopped; no listing may fail or miss an order
		for {
			select {
			case <-stop:
				return
			default:
			}
			known := ackedNow()
			start := time.Now()
			listed, err := s.tryListAll(t, q("limit", "500"))
			slowestListing.note(time.Since(start))
			if err != nil {
				t.Errorf("listing during the rebuild: %v", err)
				return
			}
			listings.Add(1)
			got := ids(listed)
			for _, id := range known {
				if !slices.Contains(got, id) {
					t.Errorf("a listing during the rebuild has %d orders and misses %s, created before it was sent", len(got), id)
					return
				}
			}
		}
	})
	wg.Go(func() { // reads idempotency keys from the lookups model, also being rebuilt
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			r, err := s.send(t, request{method: "GET", path: fmt.Sprintf("/v1/idempotency-keys/seed-%d", i%len(created))})
			slowestRead.note(time.Since(start))
			if err != nil || r.status != http.StatusOK || r.str("orderId") != created[i%len(created)] {
				t.Errorf("key seed-%d during the rebuild: %v %v; want order %s", i%len(created), r, err, created[i%len(created)])
				return
			}
			keyReads.Add(1)
		}
	})

	// Let the traffic start, then rebuild both read models under it.
	for listings.Load() == 0 && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	s.requestRebuild(t, "orders")
	s.requestRebuild(t, "lookups")
	sawRebuilding := false
	after := s.waitProjections(t, "rebuilt", func(p projection) bool {
		sawRebuilding = sawRebuilding || p.State == "rebuilding" || p.Rebuild != nil
		return p.Generation > before[p.Name].Generation && caughtUp(p)
	})
	atLastSwap := listings.Load()
	// Keep serving on the new generation for a few more listings.
	for listings.Load() < atLastSwap+2 && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Not asserted (timings are not behaviour), but a query waits for its read model, which
	// does not apply live events during a rebuild step: this shows how long that can be.
	t.Logf("%d orders at the start, %d at the end; %d listings and %d key reads served during and after the rebuild (saw it in progress: %v); slowest read by id or key %v, slowest listing of every order %v",
		len(created), len(ackedNow()), listings.Load(), keyReads.Load(), sawRebuilding, slowestRead.get(), slowestListing.get())
	for _, name := range []string{"orders", "lookups"} { // the ones rebuilt here
		p := after[name]
		if p.Generation != before[name].Generation+1 {
			t.Errorf("projection %s: generation %d after one rebuild from %d", name, p.Generation, before[name].Generation)
		}
	}

	final := s.listAll(t, q("limit", "500"))
	checkListing(t, final, ackedNow())
	s.checkRowsAreFolds(t, final)
}

// rebuildStepEvents is how many events a rebuild applies per transaction (10 × the runner's
// default batch of 1000): a log longer than that takes the rebuild through several commits.
const rebuildStepEvents = 10_000

func TestKillMidRebuild(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	// Over one rebuild step of events: 105 orders of 100 lines, and small ones.
	created := s.seedLog(t, 105, 12)
	before := s.waitProjections(t, "caught up", caughtUp)
	if before["orders"].Head <= rebuildStepEvents {
		t.Fatalf("the log has %d events; want more than %d", before["orders"].Head, rebuildStepEvents)
	}

	// pollUntil polls the status until cond holds for both projections, then kills the server
	// at once. It returns the last status seen before the kill.
	pollUntil := func(what string, cond func(p projection) bool) map[string]projection {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			ps := s.projections(t)
			if cond(ps["orders"]) && cond(ps["lookups"]) {
				s.kill(t)
				t.Logf("killed %s: orders %+v %+v, lookups %+v %+v", what, ps["orders"], ps["orders"].Rebuild, ps["lookups"], ps["lookups"].Rebuild)
				return ps
			}
			if time.Now().After(deadline) {
				t.Fatalf("not %s after 30 s: %+v", what, ps)
			}
		}
	}
	rebuilt := func(p projection) bool { return p.Generation > before[p.Name].Generation }

	// First kill: as soon as both rebuilds exist, inside their first step's transaction.
	s.requestRebuild(t, "orders")
	s.requestRebuild(t, "lookups")
	seen := pollUntil("in the first step", func(p projection) bool { return p.Rebuild != nil || rebuilt(p) })

	// Second kill: once the orders rebuild has committed a step, before it is done.
	s.restart(t)
	ps := s.projections(t)
	for _, name := range []string{"orders", "lookups"} { // the ones rebuilt here
		p := ps[name]
		if !rebuilt(p) && (p.State != "rebuilding" || p.Rebuild == nil) {
			t.Errorf("after the restart, projection %s is %+v; want its rebuild resumed", name, p)
		}
		if p.Rebuild != nil && seen[name].Rebuild != nil && p.Rebuild.Generation != seen[name].Rebuild.Generation {
			t.Errorf("projection %s resumed generation %d; it was building %d", name, p.Rebuild.Generation, seen[name].Rebuild.Generation)
		}
	}
	seen = pollUntil("after a committed step", func(p projection) bool {
		return p.Rebuild != nil && p.Rebuild.Checkpoint > 0 || rebuilt(p) || p.Name == "lookups"
	})

	s.restart(t)
	for name, p := range s.projections(t) {
		if p.Rebuild != nil && seen[name].Rebuild != nil && p.Rebuild.Checkpoint < seen[name].Rebuild.Checkpoint {
			t.Errorf("projection %s resumed its rebuild at %d; it had committed up to %d before the kill", name, p.Rebuild.Checkpoint, seen[name].Rebuild.Checkpoint)
		}
	}
	after := s.waitProjections(t, "rebuilt", func(p projection) bool {
		return p.Generation == before[p.Name].Generation+1 && caughtUp(p)
	})
	t.Logf("rebuilt: orders %+v, lookups %+v", after["orders"], after["lookups"])

	listed := s.listAll(t, q("limit", "500"))
	checkListing(t, listed, created)
	s.checkRowsAreFolds(t, listed)
	// The lookups model was rebuilt too: a sample of the keys, the small orders' among them.
	for i, id := range created {
		if i%5 == 0 || i >= 105 {
			k := keyOf(t, s.key(t, fmt.Sprintf("seed-%d", i)))
			checkKey(t, k, fmt.Sprintf("seed-%d", i), "POST", "/v1/orders", id, http.StatusCreated)
		}
	}
}

func TestKillDuringCommandBurst(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	var mu sync.Mutex
	acked := map[string]int64{} // order id → version of its last acknowledged command
	var n atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() { // create and add a line, until the server dies under it
			for i := 0; ; i++ {
				r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: fmt.Sprintf("burst-%d-%d", w, i), body: orderFor("c-burst")})
				if err != nil {
					return
				}
				if r.status != http.StatusCreated {
					t.Errorf("%v; want 201", r)
					return
				}
				id := r.str("id")
				mu.Lock()
				acked[id] = r.num("version")
				mu.Unlock()
				r, err = s.send(t, request{method: "POST", path: "/v1/orders/" + id + "/lines", key: fmt.Sprintf("burst-add-%d-%d", w, i),
					body: line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}})
				if err != nil {
					return
				}
				if r.status != http.StatusOK {
					t.Errorf("%v; want 200", r)
					return
				}
				mu.Lock()
				acked[id] = r.num("version")
				mu.Unlock()
				if n.Add(2) >= 60 {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(requestTimeout):
		t.Error("fewer than 60 commands acknowledged in time; killing anyway")
	}
	s.kill(t)
	wg.Wait() // every sender has met the dead server before it comes back
	s.restart(t)

	listed := s.listAll(t, q("customerId", "c-burst", "limit", "500"))
	checkNewestFirst(t, "listing after the kill", ids(listed))
	byID := map[string]listedOrder{}
	for _, o := range listed {
		byID[o.ID] = o
	}
	for id, version := range acked {
		o, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("acknowledged order %s (version %d) is not listed after the kill", id, version)
		case o.Version < version:
			t.Errorf("order %s listed at version %d; version %d was acknowledged", id, o.Version, version)
		}
	}
	t.Logf("%d orders acknowledged before the kill, %d listed after it", len(acked), len(listed))
	s.checkRowsAreFolds(t, listed)
	ps := s.waitProjections(t, "caught up", caughtUp)
	if !eventually(2*time.Second, func() bool {
		ps = s.projections(t)
		return ps["orders"].State == "live" && ps["lookups"].State == "live"
	}) {
		knownBug(t, bugNeverLiveAtHead, "after a restart at the head: %+v", ps)
	}
}

// A rebuild requested while one runs joins it: the generation goes up by one.
func TestRebuildRequestedTwice(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	s.seedLog(t, 10, 0)
	before := s.waitProjections(t, "caught up", caughtUp)["orders"]

	s.requestRebuild(t, "orders")
	var running projection
	if !eventually(10*time.Second, func() bool {
		running = s.projections(t)["orders"]
		return running.Rebuild != nil || running.Generation > before.Generation
	}) {
		t.Fatalf("no rebuild under way: %+v", running)
	}
	s.requestRebuild(t, "orders")
	// Only if the first rebuild still ran after the second request does this test apply.
	joined := s.projections(t)["orders"]
	after := s.waitProjections(t, "rebuilt", func(p projection) bool {
		return p.Name == "lookups" || p.Generation > before.Generation && caughtUp(p)
	})["orders"]
	switch {
	case joined.Rebuild == nil || joined.Rebuild.Generation != before.Generation+1:
		t.Logf("the first rebuild had ended before the second request (%+v); nothing to check", joined)
	case !eventually(2*time.Second, func() bool {
		after = s.projections(t)["orders"]
		return after.Generation != before.Generation+1 || after.Rebuild != nil
	}):
		// Still one generation up, and no rebuild under way: joined.
	default:
		knownBug(t, bugRebuildTwice, "generation %d before, %+v %+v after two requests", before.Generation, after, after.Rebuild)
	}
	if after.Generation <= before.Generation {
		t.Errorf("generation %d after a rebuild from %d", after.Generation, before.Generation)
	}
}
