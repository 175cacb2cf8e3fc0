package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/audit"
	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

func eur(n int64) order.Money { return order.Money{Amount: n, Currency: "EUR"} }

// lifecycle runs a random-ish life for order id.
func lifecycle(ctx context.Context, h *command.Handler, id string, n int) error {
	md := command.Metadata{Principal: "p", IdempotencyKey: "k-" + id}
	create := order.CreateOrder{OrderID: id, CustomerID: fmt.Sprint("c", n%7), Currency: "EUR",
		Lines: []order.AddLine{{SKU: "a", Quantity: int64(1 + n%3), UnitPrice: eur(250)}}}
	if n%2 == 0 {
		create.ClientRef = "ref-" + id
	}
	cmds := []order.Command{create}
	total := eur(int64(1+n%3) * 250)
	switch n % 4 {
	case 1:
		cmds = append(cmds, order.StartPayment{PaymentID: "p" + id, Amount: total}, order.ConfirmPayment{PaymentID: "p" + id, Amount: total})
	case 2:
		cmds = append(cmds, order.StartPayment{PaymentID: "p" + id, Amount: total}, order.ConfirmPayment{PaymentID: "p" + id, Amount: total},
			order.Ship{Carrier: "ups", TrackingNumber: "t" + id}, order.RequestRefund{RefundID: "r" + id, Amount: total}, order.CompleteRefund{RefundID: "r" + id})
	case 3:
		cmds = append(cmds, order.Cancel{Reason: "changed mind"})
	}
	for i, c := range cmds {
		md.IdempotencyKey = fmt.Sprintf("k-%s-%d", id, i)
		if _, err := h.Handle(ctx, id, c, md); err != nil {
			return fmt.Errorf("%s: %T: %w", id, c, err)
		}
	}
	return nil
}

type fixture struct {
	dir   string
	store *sqlite.Store
	h     *command.Handler
}

func newFixture(t *testing.T, orders int) *fixture {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &fixture{dir: dir, store: s, h: &command.Handler{Store: s}}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < orders; i += 32 {
				if err := lifecycle(context.Background(), f.h, fmt.Sprintf("o%05d", i), i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) verify(t *testing.T, reads *projections.Queries) audit.Report {
	t.Helper()
	rep, err := (&audit.Verifier{Feed: f.store, Reads: reads}).Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// tamper runs SQL on the event store's file, as someone with access to the disk could.
func (f *fixture) tamper(t *testing.T, query string, args ...any) {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(f.dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("tampering changed nothing: %s", query)
	}
}

func wantOnly(t *testing.T, rep audit.Report, want audit.Finding) {
	t.Helper()
	if len(rep.Findings) != 1 {
		t.Fatalf("%d findings, want exactly one %s at %s@%d: %v", len(rep.Findings), want.Kind, want.Stream, want.Revision, rep.Findings)
	}
	got := rep.Findings[0]
	if got.Kind != want.Kind || got.Stream != want.Stream || got.Revision != want.Revision {
		t.Fatalf("finding %v, want %s at %s@%d", got, want.Kind, want.Stream, want.Revision)
	}
}

// A thousand orders of every shape the fixture makes verify clean; the benchmarks verify more.
func TestCleanStoreVerifiesClean(t *testing.T) {
	const n = 1000
	f := newFixture(t, n)
	// The read models, built from the same log, must match every fold.
	db := f.readModels(t)
	rep := f.verify(t, &projections.Queries{DB: db})
	if len(rep.Findings) != 0 {
		t.Fatalf("%d findings on a clean store, first: %v", len(rep.Findings), rep.Findings[0])
	}
	// A row per order, a payment for half of them, a client reference for the other half.
	if rep.Streams != n || rep.RowsChecked != 2*n {
		t.Fatalf("verified %d streams and %d rows, want %d and %d", rep.Streams, rep.RowsChecked, n, 2*n)
	}
}

// readModels opens the fixture's read-model file, closed when the test ends, and builds both
// read models in it up to the log's head.
func (f *fixture) readModels(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(f.dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	buildReadModel(t, db, f.store)
	return db
}

func buildReadModel(t *testing.T, db *sql.DB, s *sqlite.Store) {
	t.Helper()
	r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{projections.Orders{}, projections.Lookups{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	head, _ := s.Head(ctx)
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	for _, name := range []string{"orders", "lookups"} {
		if err := r.WaitFor(wait, name, head); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFlippedByteIsNamed(t *testing.T) {
	f := newFixture(t, 20)
	f.tamper(t, `UPDATE events SET data = CAST(replace(CAST(data AS TEXT), '"ups"', '"upt"') AS BLOB)
		WHERE stream_id = (SELECT id FROM streams WHERE name = 'order-o00002') AND revision = 4`)
	wantOnly(t, f.verify(t, nil), audit.Finding{Kind: audit.KindTampered, Stream: "order-o00002", Revision: 4})
}

func TestDeletedEventIsNamed(t *testing.T) {
	f := newFixture(t, 20)
	f.tamper(t, `DELETE FROM events WHERE stream_id = (SELECT id FROM streams WHERE name = 'order-o00006') AND revision = 3`)
	wantOnly(t, f.verify(t, nil), audit.Finding{Kind: audit.KindMissing, Stream: "order-o00006", Revision: 3})
}

func TestReorderedEventsAreNamed(t *testing.T) {
	f := newFixture(t, 20)
	// Swap the log positions of revisions 2 and 3 of one order.
	var p2, p3 int64
	for e, err := range f.store.ReadStream(context.Background(), "order-o00010", eventstore.ReadStreamOptions{From: 2, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Revision == 2 {
			p2 = int64(e.Position.Commit)
		} else {
			p3 = int64(e.Position.Commit)
		}
	}
	f.tamper(t, `UPDATE events SET position = ? WHERE position = ?`, -1, p2)
	f.tamper(t, `UPDATE events SET position = ? WHERE position = ?`, p2, p3)
	f.tamper(t, `UPDATE events SET position = ? WHERE position = ?`, p3, -1)
	wantOnly(t, f.verify(t, nil), audit.Finding{Kind: audit.KindReordered, Stream: "order-o00010", Revision: 2})
}

func TestBrokenLinkAndJumpAreNamed(t *testing.T) {
	f := newFixture(t, 4)
	ctx := context.Background()
	// An event appended behind the handler's back, chained from Genesis instead of its
	// predecessor, that ships a cancelled order.
	o, err := f.h.Load(ctx, "o00003", "", "")
	if err != nil {
		t.Fatal(err)
	}
	stream := command.StreamName("o00003")
	data := []byte(`{"carrier":"x","trackingNumber":"y","at":"2026-11-29T00:00:00Z"}`)
	m := []byte(`{"command":"ship","at":"2026-11-29T00:00:00Z","prevHash":"` + command.Genesis + `"}`)
	hash := command.ChainHash(command.Genesis, stream, uint64(o.State.Version), "order.shipped.v1", data, m)
	md := append([]byte(`{"hash":"`+hash+`",`), m[1:]...)
	if _, err := f.store.Append(ctx, stream, eventstore.Exact(uint64(o.State.Version-1)),
		eventstore.EventData{ID: uuid.New(), Type: "order.shipped.v1", Data: data, Metadata: md}); err != nil {
		t.Fatal(err)
	}
	rep := f.verify(t, nil)
	if len(rep.Findings) != 2 || rep.Findings[0].Kind != audit.KindBrokenLink || rep.Findings[1].Kind != audit.KindInvariant ||
		rep.Findings[0].Revision != uint64(o.State.Version) || rep.Findings[0].Stream != stream {
		t.Fatalf("findings %v, want a broken link and a jump at %s@%d", rep.Findings, stream, o.State.Version)
	}
}

// forge appends an event to order id's stream behind the handler's back, chained to the
// stream's last event as the handler chains (or, without chain, with no hash), as someone who
// knows the chain's recipe, or a bug in Decide, could; it returns the event's revision.
func (f *fixture) forge(t *testing.T, id, typ, data string, chain bool) uint64 {
	t.Helper()
	ctx := context.Background()
	stream := command.StreamName(id)
	last, found, err := eventstore.Last(ctx, f.store, stream)
	if err != nil || !found {
		t.Fatalf("the last event of %s: found %v, %v", stream, found, err)
	}
	rev := last.Revision + 1
	m := []byte(`{"command":"forged","at":"2026-11-29T00:00:00Z","prevHash":"` + command.StoredHash(last.Metadata) + `"}`)
	md := m
	if chain {
		hash := command.ChainHash(command.StoredHash(last.Metadata), stream, rev, typ, []byte(data), m)
		md = append([]byte(`{"hash":"`+hash+`",`), m[1:]...)
	}
	if _, err := f.store.Append(ctx, stream, eventstore.Exact(last.Revision),
		eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(data), Metadata: md}); err != nil {
		t.Fatal(err)
	}
	return rev
}

// A log whose every event follows the state machine can still end in an order no command
// makes: the verifier names what the final state breaks, at its last event.
func TestEndOfStreamInvariantsAreNamed(t *testing.T) {
	f := newFixture(t, 4)
	// o00001 is paid 500; a refund of 501 follows a paid order, and exceeds the payment.
	rev := f.forge(t, "o00001", order.RefundRequested{}.EventType(), `{"refundId":"r-x","amount":{"amount":501,"currency":"EUR"},"at":"2026-11-29T00:00:00Z"}`, true)
	// o00000 is created; a line whose total overflows (Decide refuses its amount).
	revOverflow := f.forge(t, "o00000", order.LineAdded{}.EventType(), `{"sku":"big","quantity":3,"unitPrice":{"amount":4611686018427387904,"currency":"EUR"},"at":"2026-11-29T00:00:00Z"}`, true)
	rep := f.verify(t, nil)
	want := map[string]string{
		fmt.Sprintf("order-o00001@%d", rev):         "refunded 0 (+501 pending) exceeds paid 500",
		fmt.Sprintf("order-o00000@%d", revOverflow): "the lines' total cannot be represented",
	}
	if len(rep.Findings) != len(want) {
		t.Fatalf("findings %v, want %v", rep.Findings, want)
	}
	for _, got := range rep.Findings {
		detail, ok := want[fmt.Sprintf("%s@%d", got.Stream, got.Revision)]
		if !ok || got.Kind != audit.KindInvariant || !strings.Contains(got.Detail, detail) {
			t.Errorf("finding %v; want an invariant of %v", got, want)
		}
	}
}

// An event without a chain hash is named once, at itself, even when the rest of the stream
// follows it.
func TestUnchainedEventIsNamed(t *testing.T) {
	f := newFixture(t, 4)
	rev := f.forge(t, "o00000", order.LineAdded{}.EventType(), `{"sku":"b","quantity":1,"unitPrice":{"amount":100,"currency":"EUR"},"at":"2026-11-29T00:00:00Z"}`, false)
	f.forge(t, "o00000", order.LineRemoved{}.EventType(), `{"sku":"b","at":"2026-11-29T00:00:00Z"}`, false)
	wantOnly(t, f.verify(t, nil), audit.Finding{Kind: audit.KindUnchained, Stream: "order-o00000", Revision: rev})
}

func TestDriftIsNamed(t *testing.T) {
	f := newFixture(t, 8)
	db := f.readModels(t)
	if _, err := db.Exec(`UPDATE orders_g1 SET state = CAST(json_set(state, '$.Total.Amount', 1) AS BLOB) WHERE id = 'o00005'`); err != nil {
		t.Fatal(err)
	}
	rep := f.verify(t, &projections.Queries{DB: db})
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != audit.KindDrift || rep.Findings[0].Stream != "order-o00005" {
		t.Fatalf("findings %v, want drift of order-o00005", rep.Findings)
	}
}

// A lookup row that leads elsewhere than the log says, one missing and one that no event made
// are each named at the order event that decides the lookup, or at the order it leads to.
func TestLookupDriftIsNamed(t *testing.T) {
	f := newFixture(t, 8)
	db := f.readModels(t)
	for _, q := range []string{
		`UPDATE payments_g1 SET order_id = 'o00005' WHERE payment_id = 'po00001'`,
		`DELETE FROM client_references_g1 WHERE order_id = 'o00002'`,
		`INSERT INTO payments_g1 (principal, payment_id, order_id) VALUES ('p', 'ghost', 'o00003')`,
	} {
		if res, err := db.Exec(q); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%d rows changed by %s", n, q)
		}
	}
	rep := f.verify(t, &projections.Queries{DB: db})
	var got []string
	for _, f := range rep.Findings {
		got = append(got, fmt.Sprintf("%s %s@%d", f.Kind, f.Stream, f.Revision))
	}
	want := []string{"drift order-o00001@2", "drift order-o00002@0", "drift order-o00003@0"}
	if !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v: %v", got, want, rep.Findings)
	}
	if rep.Findings[0].Found != "order-o00005" {
		t.Fatalf("the moved payment's finding: %v, want it to name order-o00005 as found", rep.Findings[0])
	}
}

// Two orders of one principal that started one payment id, as they could before payment ids
// were claimed: the lookup leads to the first, and the log says the same.
func TestPaymentIDOfTwoOrdersIsNotDrift(t *testing.T) {
	f := newFixture(t, 4)
	ctx := context.Background()
	// o00001 started and confirmed po00001; o00000 has no payment. Without the claim, as then:
	if err := f.store.DeleteStream(ctx, command.PaymentIDStream("p", "po00001"), eventstore.Any); err != nil {
		t.Fatal(err)
	}
	md := command.Metadata{Principal: "p", IdempotencyKey: "second-start"}
	if _, err := f.h.Handle(ctx, "o00000", order.StartPayment{PaymentID: "po00001", Amount: eur(250)}, md); err != nil {
		t.Fatal(err)
	}
	db := f.readModels(t)
	if id, ok, err := (projections.Queries{DB: db}).PaymentOrder(ctx, "p", "po00001"); err != nil || !ok || id != "o00001" {
		t.Fatalf("payment lookup: %q %v %v; want o00001", id, ok, err)
	}
	if rep := f.verify(t, &projections.Queries{DB: db}); len(rep.Findings) != 0 || !rep.LookupsCompared {
		t.Fatalf("lookups compared %v, findings %v; want compared, none", rep.LookupsCompared, rep.Findings)
	}
}

// Lookups that lag behind the log are not drift: what changed after their checkpoint is not
// compared, whether the change would add a row, alter one or remove one.
func TestLaggingLookupsAreNotDrift(t *testing.T) {
	f := newFixture(t, 4)
	ctx := context.Background()
	keys := &idempotency.Keys{Store: f.store, TTL: time.Hour}
	running, releasing := claimKey(t, keys, "running"), claimKey(t, keys, "releasing")
	db := f.readModels(t)

	// After the checkpoint: a key completed, one released, one claimed; a payment started on
	// an order that had none, and an order created with a client reference.
	if err := keys.Complete(ctx, running, idempotency.Outcome{Status: 200, Body: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, releasing, "Internal Server Error"); err != nil {
		t.Fatal(err)
	}
	claimKey(t, keys, "new")
	md := command.Metadata{Principal: "p", IdempotencyKey: "late-payment"}
	if _, err := f.h.Handle(ctx, "o00000", order.StartPayment{PaymentID: "po00000", Amount: eur(250)}, md); err != nil {
		t.Fatal(err)
	}
	md.IdempotencyKey = "late-create"
	if _, err := f.h.Handle(ctx, "o99999", order.CreateOrder{OrderID: "o99999", CustomerID: "c1", Currency: "EUR", ClientRef: "ref-late"}, md); err != nil {
		t.Fatal(err)
	}
	rep, err := (&audit.Verifier{Feed: f.store, Reads: &projections.Queries{DB: db}}).Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || !rep.OrdersCompared || !rep.LookupsCompared {
		t.Fatalf("orders compared %v, lookups %v, findings %v; want both compared, none", rep.OrdersCompared, rep.LookupsCompared, rep.Findings)
	}
}

// claimKey claims principal p's key for a command on order o00000.
func claimKey(t *testing.T, keys *idempotency.Keys, key string) *idempotency.Claim {
	t.Helper()
	c, _, err := keys.Begin(context.Background(), idempotency.Request{Principal: "p", Key: key, Method: "POST",
		Path: "/v1/orders/o00000/lines", Fingerprint: "fp-" + key, OrderID: "o00000", Claimant: "test"})
	if err == nil && c != nil {
		err = keys.WriteClaim(context.Background(), c)
	}
	if err != nil || c == nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return c
}

// The idempotency-keys lookup is compared with the key streams: a row whose status differs, a
// missing row and an unexpired row without a claim are named; the row of a key whose expired
// stream was deleted is not.
func TestKeyLookupDriftIsNamed(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	keys := &idempotency.Keys{Store: f.store, TTL: time.Hour}
	if err := keys.Complete(ctx, claimKey(t, keys, "done"), idempotency.Outcome{Status: 200, Body: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := keys.Release(ctx, claimKey(t, keys, "released"), "Internal Server Error"); err != nil {
		t.Fatal(err)
	}
	claimKey(t, keys, "running")
	db := f.readModels(t)
	// Two orders with one payment and one reference between them, and two keys.
	if rep := f.verify(t, &projections.Queries{DB: db}); len(rep.Findings) != 0 || rep.RowsChecked != 6 {
		t.Fatalf("%d rows checked, findings %v; want 6 and none", rep.RowsChecked, rep.Findings)
	}
	for _, q := range []string{
		`UPDATE idempotency_keys_g1 SET status = 201 WHERE key = 'done'`,
		`DELETE FROM idempotency_keys_g1 WHERE key = 'running'`,
		`INSERT INTO idempotency_keys_g1 (stream, principal, key, method, path, order_id, claimed_at, expires_at)
			VALUES ('s-ghost', 'p', 'ghost', 'POST', '/v1/orders', 'o9', '2026-11-29T00:00:00Z', '2999-01-01T00:00:00Z')`,
		`INSERT INTO idempotency_keys_g1 (stream, principal, key, method, path, order_id, claimed_at, expires_at)
			VALUES ('s-old', 'p', 'old', 'POST', '/v1/orders', 'o9', '2026-11-28T00:00:00Z', '2026-11-28T01:00:00Z')`,
	} {
		if res, err := db.Exec(q); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%d rows changed by %s", n, q)
		}
	}
	rep := f.verify(t, &projections.Queries{DB: db})
	got := map[string]bool{}
	for _, f := range rep.Findings {
		got[fmt.Sprintf("%s %s@%d", f.Kind, f.Stream, f.Revision)] = true
	}
	want := map[string]bool{
		"drift " + idempotency.StreamName("p", "done") + "@1":    true, // claimed, completed
		"drift " + idempotency.StreamName("p", "running") + "@0": true,
		"drift " + idempotency.StreamName("p", "ghost") + "@0":   true,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("findings %v, want %v: %v", got, want, rep.Findings)
	}
}
