package projections_test

import (
	"context"
	"database/sql"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
)

// lookupsV1 is a read-model file as the runner left it before projections had versions, with
// the lookups projection at version 1: payments keyed by payment id alone, client references
// by customer and reference alone.
const lookupsV1 = `
	CREATE TABLE projection_checkpoints (
		name              TEXT PRIMARY KEY,
		generation        INTEGER NOT NULL,
		commit_position   INTEGER NOT NULL,
		prepare_position  INTEGER NOT NULL,
		shadow_generation INTEGER,
		shadow_commit     INTEGER,
		shadow_prepare    INTEGER
	) STRICT;
	CREATE TABLE idempotency_keys_g1 (
		stream TEXT NOT NULL UNIQUE, principal TEXT NOT NULL, key TEXT NOT NULL, method TEXT NOT NULL,
		path TEXT NOT NULL, order_id TEXT NOT NULL, status INTEGER, claimed_at TEXT NOT NULL,
		completed_at TEXT, expires_at TEXT NOT NULL, PRIMARY KEY (principal, key)
	) STRICT;
	CREATE TABLE payments_g1 (
		payment_id TEXT PRIMARY KEY,
		order_id   TEXT NOT NULL
	) STRICT;
	CREATE TABLE client_references_g1 (
		customer_id      TEXT NOT NULL,
		client_reference TEXT NOT NULL,
		order_id         TEXT NOT NULL,
		PRIMARY KEY (customer_id, client_reference)
	) STRICT;
	CREATE VIEW idempotency_keys AS SELECT * FROM idempotency_keys_g1;
	CREATE VIEW payments AS SELECT * FROM payments_g1;
	CREATE VIEW client_references AS SELECT * FROM client_references_g1;
	-- What version 1 made of the orders below: bob's payment replaced alice's, and only
	-- alice's order could have been created with the reference.
	INSERT INTO payments_g1 VALUES ('pay-1', 'o-bob');
	INSERT INTO client_references_g1 VALUES ('c-1', 'po-1', 'o-alice');`

// gatedFeed holds every ReadAll, which only rebuilds use, until open is closed.
type gatedFeed struct {
	eventstore.Feed
	open chan struct{}
}

func (g gatedFeed) ReadAll(ctx context.Context, opts eventstore.ReadAllOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		select {
		case <-g.open:
		case <-ctx.Done():
			yield(eventstore.RecordedEvent{}, ctx.Err())
			return
		}
		for e, err := range g.Feed.ReadAll(ctx, opts) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// runRunner runs a runner of the orders and lookups projections on db until the test ends or
// the returned stop is called.
func runRunner(t *testing.T, db *sql.DB, feed eventstore.Feed) (*projections.Runner, func()) {
	t.Helper()
	r := &projections.Runner{DB: db, Feed: feed, Projections: []projections.Projection{projections.Orders{}, projections.Lookups{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-r.Started():
	case err := <-done:
		t.Fatalf("runner: %v", err)
	}
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return r, stop
}

func statusOf(t *testing.T, r *projections.Runner, name string) projections.Status {
	t.Helper()
	st, err := r.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no projection %s in %+v", name, st)
	return projections.Status{}
}

// A read-model file whose lookups are of version 1 (written before projections had versions)
// is rebuilt when the runner starts: until the swap the lookups answer nothing (WaitFor holds
// every query) while the orders read model serves; after it, each principal finds its own
// order. A rebuild in progress that version 1 started is started again.
func TestUpgradeRebuildsOutdatedProjection(t *testing.T) {
	for _, tc := range []struct {
		name string
		more string // run on the file of lookupsV1
	}{
		{name: "live generation"},
		{name: "rebuild in progress", more: `
			CREATE TABLE payments_g2 (payment_id TEXT PRIMARY KEY, order_id TEXT NOT NULL) STRICT;
			UPDATE projection_checkpoints SET shadow_generation = 2, shadow_commit = 1, shadow_prepare = 1;`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, db := open(t, dir)
			t.Cleanup(func() { db.Close(); s.Close() })
			ctx := context.Background()
			h := &command.Handler{Store: s}
			for _, p := range []string{"alice", "bob"} {
				md := command.Metadata{Principal: p}
				id := "o-" + p
				if _, err := h.Handle(ctx, id, order.CreateOrder{OrderID: id, CustomerID: "c-1", Currency: "EUR", ClientRef: "po-1",
					Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}, md); err != nil {
					t.Fatal(err)
				}
				if _, err := h.Handle(ctx, id, order.StartPayment{PaymentID: "pay-1", Amount: eur(100)}, md); err != nil {
					t.Fatal(err)
				}
			}
			head, err := s.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(lookupsV1); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO projection_checkpoints (name, generation, commit_position, prepare_position) VALUES ('lookups', 1, ?, ?)`,
				head.Commit, head.Prepare); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tc.more); err != nil {
				t.Fatal(err)
			}
			// An auditor reads no rows of version 1 as this version's.
			if _, ok, err := lookupRows(db); err != nil || ok {
				t.Errorf("LookupRows of version 1: ok %v, %v; want none, no error", ok, err)
			}

			feed := gatedFeed{Feed: s, open: make(chan struct{})}
			r, stop := runRunner(t, db, feed)
			if st := statusOf(t, r, "lookups"); st.State != projections.StateRebuilding || st.Rebuild == nil || st.Generation != 1 || st.LagEvents == 0 {
				t.Errorf("lookups while rebuilt: %+v; want rebuilding from generation 1, behind the head", st)
			}
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err = r.WaitFor(short, "lookups", eventstore.Position{})
			cancel()
			if !errors.Is(err, projections.ErrBehind) {
				t.Errorf("WaitFor the outdated lookups at position 0: %v; want ErrBehind", err)
			}
			long, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := r.WaitFor(long, "orders", head); err != nil {
				t.Errorf("orders while the lookups are rebuilt: %v", err)
			}

			close(feed.open)
			if err := r.WaitFor(long, "lookups", head); err != nil {
				t.Fatalf("lookups after the rebuild: %v (%+v)", err, statusOf(t, r, "lookups"))
			}
			q := projections.Queries{DB: db}
			checkLookups(t, q, map[string]string{"alice": "o-alice", "bob": "o-bob"}, "c-1", "po-1", "pay-1")
			if rows, ok, err := lookupRows(db); err != nil || !ok || rows.At != head || len(rows.Payments) != 2 || len(rows.ClientReferences) != 2 {
				t.Errorf("LookupRows after the rebuild: %+v, ok %v, %v; want two payments and two references at %v", rows, ok, err, head)
			}
			if st := statusOf(t, r, "lookups"); st.State != projections.StateLive || st.Rebuild != nil || st.Generation != 2 {
				t.Errorf("lookups after the rebuild: %+v; want live at generation 2", st)
			}
			var version int
			var left int
			db.QueryRow(`SELECT version FROM projection_checkpoints WHERE name = 'lookups'`).Scan(&version)
			db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'payments_g1'`).Scan(&left)
			if version != (projections.Lookups{}).Version() || left != 0 {
				t.Errorf("stored version %d, %d old payments tables left; want %d and none", version, left, (projections.Lookups{}).Version())
			}

			// Started again, it finds the lookups current: nothing to rebuild.
			stop()
			r, _ = runRunner(t, db, s)
			if st := statusOf(t, r, "lookups"); st.State == projections.StateRebuilding || st.Generation != 2 {
				t.Errorf("lookups after a restart: %+v; want generation 2, not rebuilding", st)
			}
			if err := r.WaitFor(long, "lookups", head); err != nil {
				t.Fatal(err)
			}
			checkLookups(t, q, map[string]string{"alice": "o-alice", "bob": "o-bob"}, "c-1", "po-1", "pay-1")
		})
	}
}

// lookupRows reads the lookups in a snapshot of db.
func lookupRows(db *sql.DB) (projections.LookupRows, bool, error) {
	snap, err := (projections.Queries{DB: db}).Snapshot(context.Background())
	if err != nil {
		return projections.LookupRows{}, false, err
	}
	defer snap.Close()
	return snap.LookupRows(context.Background())
}

// An auditor's snapshot of the read models does not take the write lock: it is read while the
// projections' writer holds a transaction open.
func TestSnapshotLeavesTheWriterAlone(t *testing.T) {
	s, db := open(t, t.TempDir())
	t.Cleanup(func() { db.Close(); s.Close() })
	_, stop := runRunner(t, db, s)
	stop()
	ctx := context.Background()
	writer, err := db.BeginTx(ctx, nil) // IMMEDIATE, as every transaction of the runner
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback()
	read := make(chan error, 1)
	go func() {
		_, ok, err := lookupRows(db)
		if err == nil && !ok {
			err = errors.New("no lookups")
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("LookupRows beside an open write transaction: %v", err)
		}
	case <-time.After(5 * time.Second): // the write lock's busy timeout is 10 s
		t.Fatal("LookupRows waited for the writer's transaction")
	}
}
