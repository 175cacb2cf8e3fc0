package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// Writes queued while the writer's transaction waits for a table that another session holds
// locked fail once the statement timeout has passed since they were queued: not only after the
// transaction before them has waited out its timeout and theirs has waited out another.
func TestQueuedWriteWaitsOneTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	url := pgtest.Start(t).NewDatabase(t)
	s, err := Open(t.Context(), url, Config{StatementTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventstoretest.MustAppend(t, s, "before", eventstore.NoStream, eventstoretest.NewEvents(1)...)

	// Given a session that holds the events table and a write that waits for it,
	locker := connect(t, url)
	tx := lockEvents(t, locker)
	first := appendAsync(t.Context(), s, "first", eventstoretest.NewEvents(1)...)
	waitForTableWaiter(t, locker)

	// when writes are queued behind it,
	queued := time.Now()
	var behind []<-chan outcome
	for i := range 3 {
		behind = append(behind, appendAsync(t.Context(), s, fmt.Sprintf("behind-%d", i), eventstoretest.NewEvents(1)...))
	}

	// then each fails as unavailable within about one timeout of being queued (strictly less
	// than two, what waiting out the transaction before it and then its own would take),
	for i, appended := range append([]<-chan outcome{first}, behind...) {
		o := awaitOutcome(t, appended)
		if took := time.Since(queued); took >= timeout*7/4 {
			t.Errorf("write %d answered %v after the writes behind were queued; want within the statement timeout %v", i, took, timeout)
		}
		if !errors.Is(o.err, eventstore.ErrUnavailable) {
			t.Errorf("write %d: %v, want ErrUnavailable", i, o.err)
		}
	}

	// and once the table is free the store writes again.
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventstoretest.MustAppend(t, s, "after", eventstore.NoStream, eventstoretest.NewEvents(1)...)
}

// lockEvents locks the events table in a transaction of conn, which the caller ends.
func lockEvents(t *testing.T, conn *pgx.Conn) pgx.Tx {
	t.Helper()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(t.Context(), `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitForTableWaiter waits until a session waits for a lock on the events table: the store's
// writer, behind the session that holds it.
func waitForTableWaiter(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for deadline := time.Now().Add(patience); ; {
		var waiting int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'relation' AND relation = 'events'::regclass AND NOT granted`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waited for the events table within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitOutcome waits for an append started by appendAsync.
func awaitOutcome(t *testing.T, appended <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-appended:
		return o
	case <-time.After(patience):
		t.Fatalf("the append did not return within %v", patience)
	}
	panic("unreachable")
}
