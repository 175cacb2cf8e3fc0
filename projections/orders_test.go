package projections_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Applying order events as one batch, where each order is read and written once, leaves the
// rows that applying them one at a time leaves, and so does applying them in random slices
// (orders met again are read back from the table), with events already folded met again.
func TestOrdersBatchEqualsOneByOne(t *testing.T) {
	db := readModelsDB(t)
	ctx := context.Background()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		events := randomOrderEvents(rt)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			rt.Fatal(err)
		}
		defer tx.Rollback()
		o := projections.Orders{}
		tables := map[string]projections.Tables{}
		for _, how := range []string{"batch", "single", "slices"} {
			tables[how] = projections.Tables{"orders": fmt.Sprintf("orders_%s%d", how, n)}
			if err := o.Create(ctx, tx, tables[how]); err != nil {
				rt.Fatal(err)
			}
		}
		if err := o.Apply(ctx, tx, tables["batch"], events); err != nil {
			rt.Fatal(err)
		}
		for i := range events {
			if err := o.Apply(ctx, tx, tables["single"], events[i:i+1]); err != nil {
				rt.Fatal(err)
			}
		}
		for from := 0; from < len(events); {
			// A slice may start before the last one's end: those events are folded already.
			from = rapid.IntRange(max(0, from-2), from).Draw(rt, "from")
			to := rapid.IntRange(from+1, len(events)).Draw(rt, "to")
			if err := o.Apply(ctx, tx, tables["slices"], events[from:to]); err != nil {
				rt.Fatal(err)
			}
			from = to
		}
		want := orderRows(rt, tx, tables["single"]["orders"])
		for _, how := range []string{"batch", "slices"} {
			if diff := cmp.Diff(want, orderRows(rt, tx, tables[how]["orders"])); diff != "" {
				rt.Fatalf("orders applied as %s differ from one at a time (-one at a time +%s):\n%s", how, how, diff)
			}
		}
	})
}

// randomOrderEvents decides random commands on three orders of two principals and returns
// their events as the log holds them.
func randomOrderEvents(rt *rapid.T) []eventstore.RecordedEvent {
	states := map[string]order.State{}
	var events []eventstore.RecordedEvent
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range rapid.IntRange(1, 30).Draw(rt, "commands") {
		id := rapid.SampledFrom([]string{"o1", "o2", "o3"}).Draw(rt, "order")
		at = at.Add(time.Second)
		decided, err := order.Decide(states[id], randomCommand(rt, states[id], id), at)
		if err != nil {
			continue
		}
		for _, e := range decided {
			typ, data, err := order.Marshal(e)
			if err != nil {
				rt.Fatal(err)
			}
			pos := uint64(len(events) + 1)
			events = append(events, eventstore.RecordedEvent{Stream: command.StreamName(id), Revision: uint64(states[id].Version),
				Type: typ, Data: data, Metadata: []byte(`{"principal":"p-` + id[1:] + `","command":"c"}`),
				Position: eventstore.Position{Commit: pos, Prepare: pos}, Recorded: at})
			states[id] = order.Evolve(states[id], e)
		}
	}
	return events
}

// orderRows returns every row of an orders table, each as one string.
func orderRows(rt *rapid.T, tx *sql.Tx, table string) []string {
	r, err := tx.QueryContext(context.Background(), `SELECT id, principal, customer_id, status, currency, total, paid, refunded,
		line_count, version, position, created_at, updated_at, state FROM `+table+` ORDER BY id`)
	if err != nil {
		rt.Fatal(err)
	}
	defer r.Close()
	var out []string
	for r.Next() {
		var id, principal, customer, status, currency, created, updated, state string
		var total, paid, refunded, lines, version, position int64
		if err := r.Scan(&id, &principal, &customer, &status, &currency, &total, &paid, &refunded, &lines, &version, &position,
			&created, &updated, &state); err != nil {
			rt.Fatal(err)
		}
		out = append(out, fmt.Sprint(id, principal, customer, status, currency, total, paid, refunded, lines, version, position,
			created, updated, state))
	}
	if err := r.Err(); err != nil {
		rt.Fatal(err)
	}
	return out
}

// readModelsDB opens a read-model database in a temp dir, closed when the test ends.
func readModelsDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
