package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// patience bounds every wait for something that must happen; it guards against hangs and is
// no performance expectation.
const patience = 30 * time.Second

func TestConformance(t *testing.T) {
	server := pgtest.Start(t)
	eventstoretest.Run(t, func(t *testing.T) eventstoretest.Opener {
		url := server.NewDatabase(t)
		return func(t *testing.T) eventstoretest.Backend {
			return mustOpen(t, url)
		}
	}, eventstoretest.Options{ExpiredForgottenPerWrite: expiredChunk}) // a write of one request
}

// mustOpen opens a store on url; the caller closes it.
func mustOpen(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), url, Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// openDB opens a store on a new database and closes it when the test ends.
func openDB(t *testing.T) (*Store, string) {
	t.Helper()
	url := pgtest.Start(t).NewDatabase(t)
	s := mustOpen(t, url)
	t.Cleanup(func() { s.Close() })
	return s, url
}

// received runs a subscription of the whole log on its own goroutine and hands over its
// events; it ends with the test.
func received(t *testing.T, s *Store) <-chan eventstore.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan eventstore.RecordedEvent, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e, err := range s.SubscribeAll(ctx, eventstore.SubscribeOptions{}) {
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("subscription: %v", err)
				}
				return
			}
			events <- e
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return events
}

// next waits for the subscription's next event.
func next(t *testing.T, events <-chan eventstore.RecordedEvent) eventstore.RecordedEvent {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(patience):
		t.Fatalf("no event from the subscription within %v", patience)
	}
	panic("unreachable")
}

// The bad ordering: a transaction that takes a lower position commits after one that takes a
// higher position, while a subscriber has read past the higher one and never reads the lower.
// A transaction holds the write lock and has inserted an event, uncommitted; a concurrent
// Append must then wait for the lock rather than take the next position and commit first. The
// subscriber sees both events, once each, in position order.
func TestWriterWaitsForEarlierPositionToCommit(t *testing.T) {
	s, url := openDB(t)
	ctx := t.Context()
	events := received(t, s)
	first := eventstoretest.MustAppend(t, s, "order-1", eventstore.NoStream, eventstoretest.NewEvents(1)...)
	if e := next(t, events); e.Position != first.Position {
		t.Fatalf("first event at %v, want %v", e.Position, first.Position)
	}

	// Given a transaction that holds the write lock and has written the next position,
	held := pgtest.Connect(t, url)
	tx, err := held.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	heldID := uuid.New()
	heldPos := writeByHand(t, tx, "order-2", heldID)

	// when an append starts meanwhile,
	late := eventstoretest.NewEvents(1)
	appended := appendAsync(ctx, s, "order-3", late...)

	// then it waits for the lock, the log shows neither event, and nothing has committed,
	waitForLockWaiter(t, held)
	select {
	case o := <-appended:
		t.Fatalf("the append returned (%+v, %v) while an earlier position was uncommitted", o.res, o.err)
	default:
	}
	log, err := eventstoretest.Collect(s.ReadAll(ctx, eventstore.ReadAllOptions{}))
	if err != nil || len(log) != 1 {
		t.Fatalf("read all while the transaction is open: %d events, %v; want the first alone", len(log), err)
	}

	// and once the transaction commits, the append takes the position after it, and the
	// subscriber sees both, in position order.
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := await(t, appended)
	if res.Position.Commit <= heldPos {
		t.Errorf("the append took position %v, not after the held transaction's %d", res.Position, heldPos)
	}
	if e := next(t, events); e.ID != heldID || e.Position.Commit != heldPos {
		t.Errorf("after the first event the subscriber saw %s at %v, want %s at %d", e.ID, e.Position, heldID, heldPos)
	}
	if e := next(t, events); e.ID != late[0].ID || e.Position != res.Position {
		t.Errorf("then it saw %s at %v, want the append's %s at %v", e.ID, e.Position, late[0].ID, res.Position)
	}
}

// outcome is an Append's.
type outcome struct {
	res eventstore.AppendResult
	err error
}

// appendAsync appends events to a new stream on another goroutine.
func appendAsync(ctx context.Context, s *Store, stream string, events ...eventstore.EventData) <-chan outcome {
	appended := make(chan outcome, 1)
	go func() {
		res, err := s.Append(ctx, stream, eventstore.NoStream, events...)
		appended <- outcome{res, err}
	}()
	return appended
}

// await waits for an append started by appendAsync and fails the test if it failed.
func await(t *testing.T, appended <-chan outcome) eventstore.AppendResult {
	t.Helper()
	select {
	case o := <-appended:
		if o.err != nil {
			t.Fatal(o.err)
		}
		return o.res
	case <-time.After(patience):
		t.Fatalf("the append did not return within %v", patience)
	}
	panic("unreachable")
}

// writeByHand writes one event to a new stream as a writer of the store does, in tx, and
// returns its position.
func writeByHand(t *testing.T, tx pgx.Tx, stream string, id uuid.UUID) uint64 {
	t.Helper()
	ctx := t.Context()
	var pos int64
	steps := []func() error{
		func() error { _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, writeLockKey); return err },
		func() error {
			return tx.QueryRow(ctx, `UPDATE log_head SET position = position + 1 RETURNING position`).Scan(&pos)
		},
		func() error {
			_, err := tx.Exec(ctx, `INSERT INTO streams (name, first_revision, last_revision) VALUES ($1, 0, 0)`, stream)
			return err
		},
		func() error {
			_, err := tx.Exec(ctx, `INSERT INTO events (position, id, stream, revision, type, data, recorded)
				VALUES ($1, $2, $3, 0, 'test.event.v1', '{}', now())`, pos, id, stream)
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return uint64(pos)
}

// waitForLockWaiter waits until a session waits for an advisory lock: the store's writer,
// behind the held transaction.
func waitForLockWaiter(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for deadline := time.Now().Add(patience); ; {
		var waiting int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waited for the write lock within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stores of several processes write to one database at once, each with its own writer and its
// transactions racing for positions; a subscriber of yet another store sees every event once,
// in position order.
func TestStoresOnOneDatabaseKeepLogOrder(t *testing.T) {
	_, url := openDB(t)
	const stores, writers, perWriter = 3, 4, 100
	reader := mustOpen(t, url)
	t.Cleanup(func() { reader.Close() })
	events := received(t, reader)

	var wg sync.WaitGroup
	for i := range stores {
		s := mustOpen(t, url)
		t.Cleanup(func() { s.Close() })
		for w := range writers {
			wg.Go(func() {
				stream := fmt.Sprintf("store-%d-writer-%d", i, w)
				expected := eventstore.NoStream
				for range perWriter {
					res, err := s.Append(t.Context(), stream, expected, eventstoretest.NewEvents(1+w%2)...)
					if err != nil {
						t.Errorf("%s: %v", stream, err)
						return
					}
					expected = eventstore.Exact(res.Revision)
				}
			})
		}
	}
	wg.Wait()

	want := stores * writers * perWriter * 3 / 2
	var last eventstore.Position
	revisions := map[string]uint64{} // the next revision of each stream
	for range want {
		e := next(t, events)
		if e.Position.Compare(last) <= 0 {
			t.Fatalf("event %s@%d at %v after %v", e.Stream, e.Revision, e.Position, last)
		}
		if e.Revision != revisions[e.Stream] {
			t.Fatalf("%s: revision %d, want %d", e.Stream, e.Revision, revisions[e.Stream])
		}
		last, revisions[e.Stream] = e.Position, e.Revision+1
	}
	log, err := eventstoretest.Collect(reader.ReadAll(t.Context(), eventstore.ReadAllOptions{}))
	if err != nil || len(log) != want {
		t.Errorf("the log holds %d events (%v), want %d", len(log), err, want)
	}
}

// A subscription is woken by the commits of another store on the database (another process),
// through its listener: here it never polls.
func TestSubscriptionWokenByAnotherStore(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	reader, err := Open(t.Context(), url, Config{poll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	writer := mustOpen(t, url)
	t.Cleanup(func() { writer.Close() })
	events := received(t, reader)
	waitForListener(t, pgtest.Connect(t, url))

	// Twice: the listener wakes the subscriptions once when it starts listening, which might
	// deliver the first event alone.
	for i := range 2 {
		appended := eventstoretest.MustAppend(t, writer, fmt.Sprintf("order-%d", i), eventstore.NoStream, eventstoretest.NewEvents(1)...)
		if e := next(t, events); e.Position != appended.Position {
			t.Errorf("the subscription yielded the event at %v, want %v", e.Position, appended.Position)
		}
	}
}

// waitForListener waits until a session of the database listens for the writers'
// notifications.
func waitForListener(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for deadline := time.Now().Add(patience); ; {
		var listening int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN ' || $1`, notifyChannel).Scan(&listening)
		if err != nil {
			t.Fatal(err)
		}
		if listening > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session listened within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The context of Open bounds the opening alone: the store works on after it ends, as when a
// server opens it with a startup timeout.
func TestStoreOutlivesOpenContext(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := Open(ctx, url, Config{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	events := received(t, s)
	res := eventstoretest.MustAppend(t, s, "order-1", eventstore.NoStream, eventstoretest.NewEvents(1)...)
	if e := next(t, events); e.Position != res.Position {
		t.Errorf("the subscription yielded the event at %v, want %v", e.Position, res.Position)
	}
}

// Processes that open a new database at the same time migrate it once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	const opens = 4
	var wg sync.WaitGroup
	errs := make([]error, opens)
	for i := range opens {
		wg.Go(func() {
			s, err := Open(t.Context(), url, Config{})
			if err == nil {
				err = s.Ping(t.Context())
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	conn := pgtest.Connect(t, url)
	var versions, applied int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), count(DISTINCT version) FROM orders_schema_version`).Scan(&versions, &applied); err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(names); versions != n || applied != n {
		t.Errorf("orders_schema_version holds %d rows of %d versions, want %d of %d: each migration once", versions, applied, n, n)
	}
}

// An error of Open never shows the URL's password, whatever went wrong.
func TestOpenErrorsHideThePassword(t *testing.T) {
	const password = "s3cr3t-Pa55"
	for _, c := range []struct {
		name, url string
		want      error
	}{
		{"Unreachable", "postgres://orders:" + password + "@127.0.0.1:1/orders?connect_timeout=5", eventstore.ErrUnavailable},
		{"KeyValue", "host=127.0.0.1 port=1 user=orders password=" + password + " dbname=orders", eventstore.ErrUnavailable},
		{"Malformed", "postgres://orders:" + password + "@127.0.0.1:notaport/orders", eventstore.ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(t.Context(), c.url, Config{ConnectTimeout: 5 * time.Second})
			if !errors.Is(err, c.want) {
				t.Errorf("error = %v, want one matching %v", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// Names PostgreSQL cannot store as text are invalid arguments. An append that the server
// refuses (here one that skips the checks in Go) fails alone, whatever the appends it shared a
// transaction with.
func TestNamesThatAreNotText(t *testing.T) {
	s, _ := openDB(t)
	ctx := t.Context()
	if _, err := s.Append(ctx, "bad\x00name", eventstore.NoStream, eventstoretest.NewEvents(1)...); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Errorf("append to a stream whose name holds NUL: %v, want ErrInvalidArgument", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() {
			stream := fmt.Sprintf("good-%d", i)
			if i%4 == 0 {
				stream = "bad\x00" + stream
			}
			appends := []eventstore.StreamAppend{{Stream: stream, Expected: eventstore.NoStream, Events: eventstoretest.NewEvents(1)}}
			errs[i] = s.submit(&request{Ctx: ctx, Appends: appends})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if bad := i%4 == 0; bad != errors.Is(err, eventstore.ErrInvalidArgument) || !bad && err != nil {
			t.Errorf("append %d (bad name: %v): %v", i, bad, err)
		}
	}
	if _, err := eventstoretest.Collect(s.ReadStream(ctx, "\xff", eventstore.ReadStreamOptions{})); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Errorf("read a stream whose name is not UTF-8: %v, want ErrInvalidArgument", err)
	}
	filter := eventstore.Filter{StreamPrefixes: []string{"a\x00"}}
	if _, err := eventstoretest.Collect(s.ReadAll(ctx, eventstore.ReadAllOptions{Filter: filter})); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Errorf("read the log with a prefix holding NUL: %v, want ErrInvalidArgument", err)
	}
}

// A stored event id that only the server catches (a writer that skipped the checks in memory)
// is ErrDuplicateEventID, not a server in trouble.
func TestServerRefusalOfStoredIDIsDuplicate(t *testing.T) {
	s, _ := openDB(t)
	stored := eventstoretest.NewEvents(1)
	res := eventstoretest.MustAppend(t, s, "order-1", eventstore.NoStream, stored...)
	_, err := s.pool.Exec(t.Context(), `INSERT INTO events (position, id, stream, revision, type, data, recorded)
		VALUES ($1, $2, 'order-1', 1, 'test.event.v1', '{}', now())`, res.Position.Commit+1, stored[0].ID)
	if err := s.fault(t.Context(), err); !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Errorf("error = %v, want one matching ErrDuplicateEventID", err)
	}
}

// A deleted stream's row is kept for Config.KeepDeleted, then forgotten by later deletes.
func TestDeletedStreamsAreForgotten(t *testing.T) {
	const keep = 500 * time.Millisecond
	s, err := Open(t.Context(), pgtest.Start(t).NewDatabase(t), Config{KeepDeleted: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eventstoretest.ForgetsDeletedStreams(t, s, keep)
}
