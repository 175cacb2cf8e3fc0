package projections_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

type fixture struct {
	store  *sqlite.Store
	db     *sql.DB
	runner *projections.Runner
	orders *command.Handler
	q      projections.Queries
	stop   func()
}

// open opens a store and a read-model database in dir.
func open(t testing.TB, dir string) (*sqlite.Store, *sql.DB) {
	t.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.OpenDB(filepath.Join(dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

// start opens a store and a read-model database in dir and runs the projections.
func start(t testing.TB, dir string) *fixture {
	t.Helper()
	s, db := open(t, dir)
	r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{projections.Orders{}, projections.Lookups{}}, BatchSize: 50}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	<-r.Started()
	f := &fixture{store: s, db: db, runner: r, orders: &command.Handler{Store: s}, q: projections.Queries{DB: db}}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			db.Close()
			s.Close()
		})
	}
	t.Cleanup(f.stop)
	return f
}

// caughtUp waits until every projection has reached the store's head.
func (f *fixture) caughtUp(t testing.TB) {
	t.Helper()
	head, err := f.store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, name := range []string{"orders", "lookups"} {
		if err := f.runner.WaitFor(ctx, name, head); err != nil {
			st, _ := f.runner.Status(context.Background())
			t.Fatalf("%s did not catch up: %v (%+v)", name, err, st)
		}
	}
}

// checkRows compares every order's row with the fold of its events.
func (f *fixture) checkRows(t testing.TB, ids []string) {
	t.Helper()
	for _, id := range ids {
		o, err := f.orders.Load(context.Background(), id, "", "")
		if err != nil {
			t.Fatal(err)
		}
		row, ok, err := f.q.Order(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			if o.State.Version != 0 {
				t.Fatalf("order %s: no row, but %d events", id, o.State.Version)
			}
			continue
		}
		if diff := cmp.Diff(o.State, row.State); diff != "" {
			t.Fatalf("order %s: row differs from the fold (-fold +row):\n%s", id, diff)
		}
		if row.Position != o.Position.Commit {
			t.Fatalf("order %s: row at position %d, last event at %d", id, row.Position, o.Position.Commit)
		}
	}
}

var eur = func(n int64) order.Money { return order.Money{Amount: n, Currency: "EUR"} }

// randomCommand draws a command that often fits the order's state.
func randomCommand(t *rapid.T, s order.State, id string) order.Command {
	sku := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "sku")
	switch rapid.IntRange(0, 9).Draw(t, "kind") {
	case 0:
		return order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR", ClientRef: rapid.SampledFrom([]string{"", "ref-" + id}).Draw(t, "ref")}
	case 1, 2:
		return order.AddLine{SKU: sku, Quantity: rapid.Int64Range(1, 5).Draw(t, "qty"), UnitPrice: eur(100)}
	case 3:
		return order.RemoveLine{SKU: sku}
	case 4:
		return order.StartPayment{PaymentID: "pay-" + id, Amount: s.Total}
	case 5:
		return order.ConfirmPayment{PaymentID: rapid.SampledFrom([]string{"pay-" + id, "other-" + id}).Draw(t, "payment"), Amount: s.Total}
	case 6:
		return order.Cancel{Reason: "no"}
	case 7:
		return order.Ship{Carrier: "ups", TrackingNumber: "t-" + id}
	case 8:
		return order.RequestRefund{RefundID: "r-" + id, Amount: s.Paid}
	default:
		return order.CompleteRefund{RefundID: "r-" + id}
	}
}

// For random order histories, every read-model row equals the fold of its order's events.
func TestOrdersRowsEqualTheFold(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := start(t, t.TempDir())
		defer f.stop()
		ctx := context.Background()
		ids := []string{"o1", "o2", "o3"}
		for i := range rapid.IntRange(1, 40).Draw(rt, "commands") {
			id := rapid.SampledFrom(ids).Draw(rt, "order")
			o, err := f.orders.Load(ctx, id, "", "")
			if err != nil {
				rt.Fatal(err)
			}
			f.orders.Handle(ctx, id, randomCommand(rt, o.State, id), command.Metadata{Principal: "p", IdempotencyKey: fmt.Sprint("k", i)})
		}
		f.caughtUp(t)
		f.checkRows(t, ids)
	})
}

func TestRebuildWhileWriting(t *testing.T) {
	f := start(t, t.TempDir())
	ctx := context.Background()
	var ids []string
	create := func(i int) {
		id := fmt.Sprintf("order-%03d", i)
		ids = append(ids, id)
		c := order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR", Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}
		if _, err := f.orders.Handle(ctx, id, c, command.Metadata{Principal: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		create(i)
	}
	f.caughtUp(t)
	if err := f.runner.Rebuild("orders"); err != nil {
		t.Fatal(err)
	}
	// Keep writing and reading while it rebuilds: every read sees a whole model.
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, _, err := f.q.ListOrders(ctx, projections.OrderFilter{Limit: 500})
			if err != nil {
				readErr <- err
				return
			}
			if len(rows) < 300 {
				readErr <- fmt.Errorf("a read saw %d orders during the rebuild, want at least 300", len(rows))
				return
			}
		}
	}()
	for i := 300; i < 400; i++ {
		create(i)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := f.runner.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Generation == 2 && st[0].Rebuild == nil {
			break
		}
		if st[0].State == projections.StateFailed || time.Now().After(deadline) {
			t.Fatalf("rebuild did not finish: %+v", st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	f.caughtUp(t)
	f.checkRows(t, ids)
	rows, _, _ := f.q.ListOrders(ctx, projections.OrderFilter{Limit: 500})
	if len(rows) != 400 {
		t.Fatalf("%d orders after the rebuild, want 400", len(rows))
	}
}

func TestListOrdersPagesAreStable(t *testing.T) {
	f := start(t, t.TempDir())
	ctx := context.Background()
	ids := command.NewOrderIDs()
	create := func(customer string) {
		id := ids.New(time.Now()).String()
		c := order.CreateOrder{OrderID: id, CustomerID: customer, Currency: "EUR"}
		if _, err := f.orders.Handle(ctx, id, c, command.Metadata{Principal: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 25 {
		create([]string{"alice", "bob"}[i%2])
	}
	f.caughtUp(t)
	seen := map[string]bool{}
	cursor := ""
	for page := 0; ; page++ {
		rows, next, err := f.q.ListOrders(ctx, projections.OrderFilter{CustomerID: "alice", After: cursor, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.State.CustomerID != "alice" || seen[r.State.ID] {
				t.Fatalf("page %d: %s of %s (seen before: %v)", page, r.State.ID, r.State.CustomerID, seen[r.State.ID])
			}
			seen[r.State.ID] = true
		}
		create("alice") // inserts between pages must not shift them
		f.caughtUp(t)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 13 {
		t.Fatalf("paged through %d of alice's 13 first orders", len(seen))
	}
}

func TestLookups(t *testing.T) {
	f := start(t, t.TempDir())
	ctx := context.Background()
	md := command.Metadata{Principal: "p"}
	f.orders.Handle(ctx, "o1", order.CreateOrder{OrderID: "o1", CustomerID: "c1", Currency: "EUR", ClientRef: "cart-7",
		Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}, md)
	f.orders.Handle(ctx, "o1", order.StartPayment{PaymentID: "pay-9", Amount: eur(100)}, md)
	f.caughtUp(t)
	if id, ok, err := f.q.PaymentOrder(ctx, "p", "pay-9"); err != nil || !ok || id != "o1" {
		t.Fatalf("payment lookup: %q %v %v", id, ok, err)
	}
	if id, ok, err := f.q.ClientReferenceOrder(ctx, "p", "c1", "cart-7"); err != nil || !ok || id != "o1" {
		t.Fatalf("client reference lookup: %q %v %v", id, ok, err)
	}
	if _, ok, _ := f.q.PaymentOrder(ctx, "p", "nope"); ok {
		t.Fatal("unknown payment found")
	}
}

// Two principals that choose the same payment id, customer id and client reference each find
// their own order, whichever came last.
func TestLookupsArePerPrincipal(t *testing.T) {
	f := start(t, t.TempDir())
	ctx := context.Background()
	for _, p := range []string{"alice", "bob"} {
		md := command.Metadata{Principal: p}
		id := "o-" + p
		if _, err := f.orders.Handle(ctx, id, order.CreateOrder{OrderID: id, CustomerID: "c-1", Currency: "EUR", ClientRef: "po-1",
			Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}, md); err != nil {
			t.Fatal(err)
		}
		if _, err := f.orders.Handle(ctx, id, order.StartPayment{PaymentID: "pay-1", Amount: eur(100)}, md); err != nil {
			t.Fatal(err)
		}
	}
	f.caughtUp(t)
	checkLookups(t, f.q, map[string]string{"alice": "o-alice", "bob": "o-bob"}, "c-1", "po-1", "pay-1")
	if id, ok, err := f.q.PaymentOrder(ctx, "carol", "pay-1"); err != nil || ok {
		t.Errorf("carol's pay-1: %q %v %v; want none", id, ok, err)
	}
}

// checkLookups checks that each principal finds its order by payment id and by client reference.
func checkLookups(t *testing.T, q projections.Queries, orders map[string]string, customer, ref, paymentID string) {
	t.Helper()
	ctx := context.Background()
	for p, want := range orders {
		if id, ok, err := q.PaymentOrder(ctx, p, paymentID); err != nil || !ok || id != want {
			t.Errorf("%s's payment %s: %q %v %v; want %s", p, paymentID, id, ok, err, want)
		}
		if id, ok, err := q.ClientReferenceOrder(ctx, p, customer, ref); err != nil || !ok || id != want {
			t.Errorf("%s's reference %s/%s: %q %v %v; want %s", p, customer, ref, id, ok, err, want)
		}
	}
}

func TestRestartResumesExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	f := start(t, dir)
	ctx := context.Background()
	for i := range 50 {
		id := fmt.Sprint("o", i%5)
		var c order.Command = order.AddLine{SKU: fmt.Sprint("s", i), Quantity: 1, UnitPrice: eur(10)}
		if i < 5 {
			c = order.CreateOrder{OrderID: id, CustomerID: "c", Currency: "EUR"}
		}
		if _, err := f.orders.Handle(ctx, id, c, command.Metadata{Principal: "p"}); err != nil {
			t.Fatal(err)
		}
		if i == 25 {
			f.caughtUp(t)
			f.stop()
			f = start(t, dir)
		}
	}
	f.caughtUp(t)
	f.checkRows(t, []string{"o0", "o1", "o2", "o3", "o4"})
}

// counted is a projection that records how many events each of its transactions applied.
type counted struct {
	mu      sync.Mutex
	batches []int
}

func (*counted) Name() string              { return "counted" }
func (*counted) Version() int              { return 1 }
func (*counted) Filter() eventstore.Filter { return eventstore.Filter{} }
func (*counted) Tables() []string          { return []string{"counted"} }
func (*counted) Create(ctx context.Context, tx *sql.Tx, t projections.Tables) error {
	_, err := tx.ExecContext(ctx, `CREATE TABLE `+t["counted"]+` (n INTEGER)`)
	return err
}

func (c *counted) Apply(_ context.Context, _ *sql.Tx, _ projections.Tables, events []eventstore.RecordedEvent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, len(events))
	return nil
}

func (c *counted) sizes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.batches)
}

// runCounted runs r, with a counted projection, over a new store; it returns the store.
func runCounted(t *testing.T, r *projections.Runner, p projections.Projection) *sqlite.Store {
	t.Helper()
	s, db := open(t, t.TempDir())
	r.DB, r.Feed, r.Projections = db, s, []projections.Projection{p}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		db.Close()
		s.Close()
	})
	<-r.Started()
	return s
}

// appendEvent appends an event to a stream of its own, in a commit of its own.
func appendEvent(t *testing.T, s *sqlite.Store) eventstore.Position {
	t.Helper()
	res, err := s.Append(context.Background(), "s-"+uuid.NewString(), eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: "test", Data: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Position
}

// appliedUpTo waits until the counted projection has applied pos. It polls Status rather than
// calling WaitFor, which would cut a linger short.
func appliedUpTo(t *testing.T, r *projections.Runner, pos eventstore.Position) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := r.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Checkpoint.Compare(pos) >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not applied up to %v: %+v", pos, st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A lingering projection applies events that arrive one commit at a time in one transaction:
// once it holds BatchSize events, or once the linger has passed.
func TestLingerAppliesEventsTogether(t *testing.T) {
	p := &counted{}
	r := &projections.Runner{BatchSize: 3, Linger: 2 * time.Second}
	s := runCounted(t, r, p)
	var pos eventstore.Position
	for range 3 {
		pos = appendEvent(t, s)
		time.Sleep(20 * time.Millisecond) // without a linger, each is applied alone
	}
	appliedUpTo(t, r, pos)
	if diff := cmp.Diff([]int{3}, p.sizes()); diff != "" {
		t.Fatalf("events per transaction, a full batch (-want +got):\n%s", diff)
	}
	appliedUpTo(t, r, appendEvent(t, s))
	if diff := cmp.Diff([]int{3, 1}, p.sizes()); diff != "" {
		t.Fatalf("events per transaction, after the linger (-want +got):\n%s", diff)
	}
}

// A reader waiting for a position never waits for a linger: one that starts waiting during a
// linger cuts it short, and while one waits no linger starts. The linger is a minute; WaitFor
// gets 10 s.
func TestWaitForDoesNotWaitForALinger(t *testing.T) {
	r := &projections.Runner{Linger: time.Minute}
	s := runCounted(t, r, &counted{})
	waitFor := func(pos eventstore.Position) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.WaitFor(ctx, "counted", pos)
	}

	pos := appendEvent(t, s)
	time.Sleep(100 * time.Millisecond) // for the projection to take the event and linger with it
	if err := waitFor(pos); err != nil {
		t.Fatalf("a reader arriving during a linger: %v", err)
	}

	// The next event is after pos: at pos+1 or later.
	next := eventstore.Position{Commit: pos.Commit + 1, Prepare: pos.Prepare + 1}
	waited := make(chan error, 1)
	go func() { waited <- waitFor(next) }()
	time.Sleep(100 * time.Millisecond) // for the reader to be waiting before the event arrives
	appendEvent(t, s)
	if err := <-waited; err != nil {
		t.Fatalf("a reader waiting before the event arrived: %v", err)
	}
}

// selective is a counted projection that applies only events of type "kept".
type selective struct{ counted }

func (*selective) Name() string            { return "counted" }
func (*selective) Applies(typ string) bool { return typ == "kept" }

var _ projections.Selective = (*selective)(nil)

// storedCheckpoint is the commit position stored with the projection's checkpoint.
func storedCheckpoint(t *testing.T, db *sql.DB, name string) uint64 {
	t.Helper()
	var c uint64
	if err := db.QueryRow(`SELECT commit_position FROM projection_checkpoints WHERE name = ?`, name).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// A selective projection is handed only the events it applies. Batches without any commit
// nothing: the checkpoint moves in memory, so that a read waiting for their positions is
// answered, and reaches the file with the next batch that writes or after ten BatchSizes of
// events.
func TestSelectiveProjectionSkipsWithoutWriting(t *testing.T) {
	p := &selective{}
	r := &projections.Runner{BatchSize: 5, Linger: -1}
	s := runCounted(t, r, p)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	appendTyped := func(typ string) eventstore.Position {
		res, err := s.Append(ctx, "s-"+uuid.NewString(), eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Position
	}

	kept := appendTyped("kept")
	// Applied before any other event is appended, kept's batch holds it alone: a live batch
	// may otherwise take whatever the log holds, up to ten BatchSizes.
	if err := r.WaitFor(ctx, "counted", kept); err != nil {
		t.Fatal(err)
	}
	var skipped eventstore.Position
	for range 20 {
		skipped = appendTyped("other")
	}
	if err := r.WaitFor(ctx, "counted", skipped); err != nil {
		t.Fatalf("a read waiting for a skipped event's position: %v", err)
	}
	if diff := cmp.Diff([]int{1}, p.sizes()); diff != "" {
		t.Fatalf("events per Apply (-want +got):\n%s", diff)
	}
	// The checkpoint is stored with the batch that applied kept, and not with the skipped ones.
	if got := storedCheckpoint(t, r.DB, "counted"); got != kept.Commit {
		t.Fatalf("stored checkpoint at %d; want %d, the last event applied", got, kept.Commit)
	}

	// Ten batch sizes more of skipped events: however many the batch of kept took, at least
	// ten batch sizes now went by unsaved, and the checkpoint is stored on its own.
	for range 10 * r.BatchSize {
		skipped = appendTyped("other")
	}
	if err := r.WaitFor(ctx, "counted", skipped); err != nil {
		t.Fatal(err)
	}
	if got := storedCheckpoint(t, r.DB, "counted"); got < kept.Commit+uint64(r.BatchSize) {
		t.Fatalf("stored checkpoint at %d after 70 skipped events; want it past the batch of %d", got, kept.Commit)
	}
	last := appendTyped("kept")
	if err := r.WaitFor(ctx, "counted", last); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 1}, p.sizes()); diff != "" {
		t.Fatalf("events per Apply (-want +got):\n%s", diff)
	}
	if got := storedCheckpoint(t, r.DB, "counted"); got != last.Commit {
		t.Fatalf("stored checkpoint at %d; want %d", got, last.Commit)
	}
}

// picky is counted that cannot apply an event of type "poison" while broken, as a handler
// with a bug would; it records the types of the events of each batch it applied.
type picky struct {
	counted
	broken  atomic.Bool
	mu      sync.Mutex
	applied []string
}

func (p *picky) Apply(_ context.Context, _ *sql.Tx, _ projections.Tables, events []eventstore.RecordedEvent) error {
	var types []string
	for _, e := range events {
		if e.Type == "poison" && p.broken.Load() {
			return errors.New("cannot apply poison")
		}
		types = append(types, e.Type)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applied = append(p.applied, types...)
	return nil
}

func (p *picky) types() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.applied)
}

// A projection that cannot apply an event stays failed on it, with the error in its status,
// and applies nothing after it, however long it retries; once the projection is fixed, it
// applies that event and those after it, each once, in log order.
func TestFailingEventIsAppliedOnceFixed(t *testing.T) {
	p := &picky{}
	p.broken.Store(true)
	r := &projections.Runner{Log: slog.New(slog.DiscardHandler)}
	s := runCounted(t, r, p)
	appendTyped := func(typ string) eventstore.Position {
		res, err := s.Append(context.Background(), "s-"+uuid.NewString(), eventstore.Any, eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Position
	}
	first := appendTyped("before")
	appliedUpTo(t, r, first)
	poison := appendTyped("poison")
	appendTyped("after")

	deadline := time.Now().Add(20 * time.Second)
	for retries := 0; retries < 3; {
		st, err := r.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st[0].State == projections.StateFailed && strings.Contains(st[0].Error, "cannot apply poison") {
			if st[0].Checkpoint.Compare(poison) >= 0 {
				t.Fatalf("failed at checkpoint %v, past the poison event at %v", st[0].Checkpoint, poison)
			}
			retries++ // seen failed three times: it retried at least twice, 100 and 200 ms apart
			time.Sleep(300 * time.Millisecond)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v; want failed on the poison event", st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"before"}, p.types()); diff != "" {
		t.Fatalf("applied while failed (-want +got):\n%s", diff)
	}

	p.broken.Store(false)
	last := appendTyped("later")
	appliedUpTo(t, r, last)
	if diff := cmp.Diff([]string{"before", "poison", "after", "later"}, p.types()); diff != "" {
		t.Fatalf("applied once fixed (-want +got):\n%s", diff)
	}
	st, err := r.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st[0].State == projections.StateFailed || st[0].Error != "" {
		t.Errorf("status once fixed: %+v; want it failed no more, without the error", st[0])
	}
}
