package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	locker := pgtest.Connect(t, url)
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

// A database turned read-only, as a failover leaves a demoted primary, refuses every write
// while it answers Ping: CheckWritable says why, and says nothing once it takes writes again.
func TestCheckWritableSeesReadOnlyDatabase(t *testing.T) {
	url := pgtest.StartOwn(t).NewDatabase(t) // ALTER SYSTEM is the whole server's
	s := mustOpen(t, url)
	defer s.Close()
	admin := pgtest.Connect(t, url)
	t.Cleanup(func() { pgtest.SetReadOnly(t, admin, false) }) // for the database to be dropped
	if err := s.CheckWritable(t.Context()); err != nil {
		t.Fatalf("a writable database: %v", err)
	}

	pgtest.SetReadOnly(t, admin, true)
	var err error
	for deadline := time.Now().Add(patience); err == nil; err = s.CheckWritable(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("CheckWritable still nil %v after the database turned read-only", patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, eventstore.ErrUnavailable) || !strings.Contains(err.Error(), "transaction_read_only is on") {
		t.Errorf("CheckWritable on a read-only database: %v; want ErrUnavailable naming transaction_read_only", err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping on a read-only database: %v; want nil, which is why readiness needs CheckWritable", err)
	}
	if _, err := s.Append(t.Context(), "refused", eventstore.NoStream, eventstoretest.NewEvents(1)...); !errors.Is(err, eventstore.ErrUnavailable) {
		t.Errorf("append to a read-only database: %v; want ErrUnavailable", err)
	}

	pgtest.SetReadOnly(t, admin, false)
	for deadline := time.Now().Add(patience); s.CheckWritable(t.Context()) != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("CheckWritable still failing %v after the database took writes again", patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
	eventstoretest.MustAppend(t, s, "taken", eventstore.NoStream, eventstoretest.NewEvents(1)...)
}
