package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/internal/syncbuf"
	"github.com/acme/orders/projections"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// Two orders of one principal that started one payment id (possible only before payment ids
// were claimed): the lookup keeps leading to the first, which the later start never replaces,
// and says so in the log. The first order starting its id again is no conflict.
func TestPaymentLookupKeepsTheFirstOrder(t *testing.T) {
	s, db := open(t, t.TempDir())
	t.Cleanup(func() { db.Close(); s.Close() })
	ctx := context.Background()
	h := &command.Handler{Store: s}
	md := command.Metadata{Principal: "p"}
	for _, id := range []string{"o1", "o2"} {
		if _, err := h.Handle(ctx, id, order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}, md); err != nil {
			t.Fatal(err)
		}
	}
	started := func(id string) {
		t.Helper()
		o, err := h.Load(ctx, id, "", "")
		if err != nil {
			t.Fatal(err)
		}
		typ, data, _ := order.Marshal(order.PaymentStarted{PaymentID: "pay-1", Amount: eur(100), At: time.Now()})
		if _, err := s.Append(ctx, command.StreamName(id), eventstore.Exact(o.Revision()),
			eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: []byte(`{"principal":"p","command":"start-payment"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	started("o1")
	if _, err := h.Handle(ctx, "o1", order.FailPayment{PaymentID: "pay-1", Reason: "declined"}, md); err != nil {
		t.Fatal(err)
	}
	started("o1")
	started("o2")

	var logged syncbuf.Buffer
	r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{
		projections.Lookups{Log: slog.New(slog.NewTextHandler(&logged, nil))}}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	if err := r.WaitFor(wait, "lookups", head); err != nil {
		t.Fatal(err)
	}
	q := projections.Queries{DB: db}
	if id, ok, err := q.PaymentOrder(ctx, "p", "pay-1"); err != nil || !ok || id != "o1" {
		t.Fatalf("payment lookup: %q %v %v; want o1, the first order that started it", id, ok, err)
	}
	if got := strings.Count(logged.String(), "second_order=o2"); got != 1 {
		t.Errorf("the second order's start logged %d times, want once:\n%s", got, logged.String())
	}
}

// Applying key events as one batch, where a claim and the outcome that follows it are written
// as one row, leaves the rows that applying them one at a time leaves: takeovers with the first
// claim's expiry, new lives after expiry, releases, second outcomes, in any order of keys.
func TestLookupsBatchEqualsOneByOne(t *testing.T) {
	db := readModelsDB(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		batch, single := projections.Tables{}, projections.Tables{}
		for _, name := range (projections.Lookups{}).Tables() {
			batch[name], single[name] = fmt.Sprintf("%s_b%d", name, n), fmt.Sprintf("%s_s%d", name, n)
		}
		var events []eventstore.RecordedEvent
		revisions := map[string]uint64{}
		for i := range rapid.IntRange(1, 12).Draw(rt, "events") {
			key := rapid.SampledFrom([]string{"k1", "k2", "k3"}).Draw(rt, "key")
			stream := idempotency.StreamName("p", key)
			var typ string
			var v any
			switch rapid.IntRange(0, 2).Draw(rt, "kind") {
			case 0:
				typ = idempotency.TypeClaimed
				v = idempotency.Claimed{Principal: "p", Key: key, Method: "POST", Path: "/v1/orders", OrderID: fmt.Sprint("o", i),
					ClaimedAt: base.Add(time.Duration(i) * time.Second), ExpiresAt: base.Add(time.Duration(rapid.IntRange(1, 2).Draw(rt, "expiry")) * time.Hour)}
			case 1:
				typ = idempotency.TypeCompleted
				v = idempotency.Completed{Outcome: idempotency.Outcome{Status: rapid.SampledFrom([]int{201, 409, 422}).Draw(rt, "status")},
					CompletedAt: base.Add(time.Duration(i) * time.Second)}
			default:
				typ, v = idempotency.TypeReleased, idempotency.Released{Reason: "5xx", ReleasedAt: base}
			}
			data, _ := json.Marshal(v)
			events = append(events, eventstore.RecordedEvent{Stream: stream, Revision: revisions[stream], Type: typ, Data: data,
				Position: eventstore.Position{Commit: uint64(i + 1), Prepare: uint64(i + 1)}})
			revisions[stream]++
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer tx.Rollback()
		l := projections.Lookups{}
		for _, tables := range []projections.Tables{batch, single} {
			if err := l.Create(ctx, tx, tables); err != nil {
				rt.Fatal(err)
			}
		}
		if err := l.Apply(ctx, tx, batch, events); err != nil {
			rt.Fatal(err)
		}
		for i := range events {
			if err := l.Apply(ctx, tx, single, events[i:i+1]); err != nil {
				rt.Fatal(err)
			}
		}
		rows := func(table string) []string {
			r, err := tx.QueryContext(ctx, `SELECT stream, order_id, claimed_at, expires_at, coalesce(status, -1), coalesce(completed_at, 'none')
				FROM `+table+` ORDER BY stream`)
			if err != nil {
				rt.Fatal(err)
			}
			defer r.Close()
			var out []string
			for r.Next() {
				var stream, orderID, claimed, expires, completed string
				var status int
				if err := r.Scan(&stream, &orderID, &claimed, &expires, &status, &completed); err != nil {
					rt.Fatal(err)
				}
				out = append(out, fmt.Sprint(stream[len(stream)-6:], orderID, claimed, expires, status, completed))
			}
			return out
		}
		if diff := cmp.Diff(rows(single["idempotency_keys"]), rows(batch["idempotency_keys"])); diff != "" {
			rt.Fatalf("keys applied as one batch differ from one at a time (-one at a time +batch):\n%s", diff)
		}
	})
}

// A key's row goes once the log has a claim more than KeyRowsKept after the key's expiry; one
// expired more recently stays, answering as expired. Times are the log's, not today's.
func TestLookupsForgetKeysLongExpired(t *testing.T) {
	db := readModelsDB(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	claim := func(key string, at time.Time, position uint64) eventstore.RecordedEvent {
		data, _ := json.Marshal(idempotency.Recorded{
			Claimed: idempotency.Claimed{Principal: "p", Key: key, Method: "POST", Path: "/v1/orders", OrderID: "o-" + key,
				ClaimedAt: at, ExpiresAt: at.Add(time.Hour)},
			Outcome: idempotency.Outcome{Status: 201}})
		return eventstore.RecordedEvent{Stream: idempotency.StreamName("p", key), Type: idempotency.TypeRecorded, Data: data,
			Position: eventstore.Position{Commit: position, Prepare: position}}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	l, tables := projections.Lookups{}, projections.Tables{}
	for _, name := range l.Tables() {
		tables[name] = name
	}
	if err := l.Create(ctx, tx, tables); err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		rows, err := tx.QueryContext(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			out = append(out, k)
		}
		return out
	}
	// old expires at 1:00, recent at 3:00; a claim at 26:00 is more than KeyRowsKept after the
	// first, not after the second.
	for i, e := range []eventstore.RecordedEvent{claim("old", base, 1), claim("recent", base.Add(2*time.Hour), 2)} {
		if err := l.Apply(ctx, tx, tables, []eventstore.RecordedEvent{e}); err != nil {
			t.Fatal(i, err)
		}
	}
	if err := l.Apply(ctx, tx, tables, []eventstore.RecordedEvent{claim("new", base.Add(26*time.Hour), 3)}); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(), []string{"new", "recent"}; !cmp.Equal(got, want) {
		t.Errorf("keys %v; want %v", got, want)
	}
}
