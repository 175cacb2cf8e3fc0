package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/command/commandtest"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/postgres"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// runAPIEnv, set to 1, makes the test binary run the command line as main does, with its
// arguments: the copy tests kill a real process that way.
const runAPIEnv = "ORDERS_TEST_RUN_API"

// TestMain runs the command line when asked to (runAPIEnv), else the tests, and then stops
// the PostgreSQL server that pgtest started for them, if any.
func TestMain(m *testing.M) {
	if os.Getenv(runAPIEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(pgtest.Main(m))
}

// copiedEvent is what a copy keeps of an event: everything but its time (its position, where
// both stores number their log 1, 2, 3…).
type copiedEvent struct {
	ID             uuid.UUID
	Stream         string
	Revision       uint64
	Position       uint64
	Type           string
	Data, Metadata string
}

// copyLogOf reads the whole log of s.
func copyLogOf(t *testing.T, s eventstore.Feed) []copiedEvent {
	t.Helper()
	var out []copiedEvent
	for e, err := range s.ReadAll(context.Background(), eventstore.ReadAllOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, copiedEvent{e.ID, e.Stream, e.Revision, e.Position.Commit, e.Type, string(e.Data), string(e.Metadata)})
	}
	return out
}

// copyStreamOf reads stream of s, nil if it is not found.
func copyStreamOf(t *testing.T, s eventstore.Store, stream string) []copiedEvent {
	t.Helper()
	var out []copiedEvent
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, copiedEvent{e.ID, e.Stream, e.Revision, e.Position.Commit, e.Type, string(e.Data), string(e.Metadata)})
	}
	return out
}

// openCopyPostgres opens the store of the database at url for the test.
func openCopyPostgres(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openCopySQLite opens the embedded store of dir; the caller closes it.
func openCopySQLite(t testing.TB, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The streams that seedCopySource truncates and deletes, as the webhooks do, and as earlier releases deleted expired keys.
const (
	copyDelivery  = "webhook-delivery-ep1"  // 33 events, truncated before 25: reads 25..32
	copyDead      = "webhook-dead-ep1"      // 5 events, truncated before 4: reads 4
	copyRecreated = "idempotency-recreated" // 3 events, deleted, 2 more: reads 3..4
	copyGone      = "idempotency-gone"      // 2 events, deleted
	copyExpired   = "idempotency-expired"   // the log's last 2 events, deleted
)

// seedCopySource writes orders orders into a new data directory with the command handler,
// each created with a line, given another and its quantity changed, one command of each order
// after the other so that their streams interleave in the log, each command after the claim of
// its key, which then expires (expiringKeys); and, among them, the streams above, truncated and
// deleted as the service truncates and deletes streams.
func seedCopySource(t *testing.T, orders int) string {
	t.Helper()
	dir := t.TempDir()
	s := openCopySQLite(t, dir)
	defer s.Close()
	ctx := context.Background()
	h := &command.Handler{Store: expiringKeys{t, s}}
	eur := func(n int64) order.Money { return order.Money{Amount: n, Currency: "EUR"} }
	ids := make([]string, orders)
	for i := range ids {
		ids[i] = ulid.Make().String()
		create := order.CreateOrder{OrderID: ids[i], CustomerID: fmt.Sprint("c-", i), Currency: "EUR",
			Lines: []order.AddLine{{SKU: "book", Quantity: 2, UnitPrice: eur(1250)}}}
		if _, err := h.Handle(ctx, ids[i], create, command.Metadata{Principal: "shop-1", IdempotencyKey: "create-" + ids[i]}, command.NewOrder()); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			copyAppend(t, s, copyDelivery, 3)
		}
	}
	copyAppend(t, s, copyDead, 5)
	copyAppend(t, s, copyRecreated, 3)
	copyAppend(t, s, copyGone, 2)
	for i, id := range ids {
		if _, err := h.Handle(ctx, id, order.AddLine{SKU: "pen", Quantity: 1, UnitPrice: eur(300)}, command.Metadata{Principal: "shop-1", IdempotencyKey: "add-" + id}); err != nil {
			t.Fatal(err)
		}
		if i == orders/2 {
			copyTruncate(t, s)
		}
	}
	for _, id := range ids {
		if _, err := h.Handle(ctx, id, order.ChangeLineQuantity{SKU: "book", Quantity: 3}, command.Metadata{Principal: "shop-1", IdempotencyKey: "qty-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	copyAppend(t, s, copyDelivery, 3)
	// The log's last events are removed: the copy's positions go on after them all the same.
	copyAppend(t, s, copyExpired, 2)
	if err := s.DeleteStream(ctx, copyExpired, eventstore.Exact(1)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// expiringKeys is a store whose every append of an order's events comes after the claim of a
// key of its own, which is then deleted: the log has a removed event before each command's, as
// the service's had once earlier releases deleted expired keys.
type expiringKeys struct {
	t *testing.T
	*sqlite.Store
}

func (s expiringKeys) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	key := "idempotency-" + events[0].ID.String()
	copyAppend(s.t, s.Store, key, 1)
	res, err := s.Store.Append(ctx, stream, expected, events...)
	if err := s.Store.DeleteStream(ctx, key, eventstore.Exact(0)); err != nil {
		s.t.Fatal(err)
	}
	return res, err
}

// copyTruncate truncates and deletes the streams as the constants above say.
func copyTruncate(t *testing.T, s *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	for len(copyStreamOf(t, s, copyDelivery)) < 30 {
		copyAppend(t, s, copyDelivery, 3)
	}
	for _, err := range []error{
		s.Truncate(ctx, copyDelivery, 25), s.Truncate(ctx, copyDead, 4),
		s.DeleteStream(ctx, copyRecreated, eventstore.Exact(2)), s.DeleteStream(ctx, copyGone, eventstore.Exact(1)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	copyAppend(t, s, copyRecreated, 2)
}

// copyAppend appends n events to the end of stream.
func copyAppend(t *testing.T, s eventstore.Store, stream string, n int) {
	t.Helper()
	expected := eventstore.NoStream
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}) {
		if err == nil {
			expected = eventstore.Exact(e.Revision)
		}
	}
	events := make([]eventstore.EventData, n)
	for i := range events {
		events[i] = eventstore.EventData{ID: uuid.New(), Type: "test.note.v1", Data: fmt.Appendf(nil, `{"n":%d}`, i), Metadata: []byte(`{"by":"test"}`)}
	}
	if _, err := s.Append(context.Background(), stream, expected, events...); err != nil {
		t.Fatal(err)
	}
}

// copyVerify runs audit verify on a store and fails the test unless it is clean.
func copyVerify(t *testing.T, args ...string) {
	t.Helper()
	r := runCLI(t, append([]string{"audit", "verify", "--data", t.TempDir()}, args...)...)
	if r.err != nil || !strings.Contains(r.stdout, "no findings") {
		t.Fatalf("audit verify %s: %v\n%s", strings.Join(args, " "), r.err, r.stdout)
	}
}

// An embedded store copied into PostgreSQL and back into a new data directory: every event
// the same, in the same order, with the same ids, revisions, data and metadata; the truncated
// streams read from the same revision, the deleted one is gone, and audit verify finds nothing
// on either copy. A second run finds everything copied and copies nothing.
func TestStoreCopyEmbeddedToPostgresAndBack(t *testing.T) {
	src := seedCopySource(t, 60)
	url := pgtest.Start(t).NewDatabase(t)
	back := filepath.Join(t.TempDir(), "back")

	r := runCLI(t, "store", "copy", "--from", src, "--to", url, "--batch", "8")
	if r.err != nil {
		t.Fatalf("copy into PostgreSQL: %v\n%s", r.err, r.stdout)
	}
	if !strings.Contains(r.stdout, "3 streams began past revision 0") {
		t.Errorf("copy into PostgreSQL printed:\n%s\nwant the 3 streams that begin past revision 0 counted", r.stdout)
	}
	r = runCLI(t, "store", "copy", "--from", url, "--to", back)
	if r.err != nil {
		t.Fatalf("copy back: %v\n%s", r.err, r.stdout)
	}

	s := openCopySQLite(t, src)
	want := copyLogOf(t, s)
	streams := map[string][]copiedEvent{}
	for _, name := range []string{copyDelivery, copyDead, copyRecreated, copyGone, want[0].Stream} {
		streams[name] = copyStreamOf(t, s, name)
	}
	head, err := s.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(want) != 60*4+11 || streams[copyGone] != nil || streams[copyDelivery][0].Revision != 25 || streams[copyRecreated][0].Revision != 3 {
		t.Fatalf("the source holds %d events, %s from revision %d, %s from %d: not what seedCopySource writes",
			len(want), copyDelivery, streams[copyDelivery][0].Revision, copyRecreated, streams[copyRecreated][0].Revision)
	}
	pg := openCopyPostgres(t, url)
	b := openCopySQLite(t, back)
	defer b.Close()
	for name, copied := range map[string]backend{"PostgreSQL": pg, "embedded": b} {
		if diff := cmp.Diff(want, copyLogOf(t, copied)); diff != "" {
			t.Errorf("the log of the %s copy differs from the source's (-source +copy):\n%s", name, diff)
		}
		if got, err := copied.Head(context.Background()); err != nil || got != head {
			t.Errorf("the head of the %s copy is %v (%v), the source's %v", name, got, err, head)
		}
		for stream, events := range streams {
			if diff := cmp.Diff(events, copyStreamOf(t, copied, stream)); diff != "" {
				t.Errorf("stream %s of the %s copy differs from the source's (-source +copy):\n%s", stream, name, diff)
			}
		}
	}
	b.Close()
	copyVerify(t, "--store", "postgres", "--postgres-url", url)
	copyVerify(t, "--data", back)

	r = runCLI(t, "store", "copy", "--from", src, "--to", url)
	if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("held the source's first %d events", len(want))) || !strings.Contains(r.stdout, "copied 0 events") {
		t.Fatalf("copy again: %v\n%s", r.err, r.stdout)
	}
	// The streams go on at the source's revisions.
	copyAppend(t, pg, copyDelivery, 1)
	if got := copyStreamOf(t, pg, copyDelivery); got[len(got)-1].Revision != 33 {
		t.Errorf("an append to %s after the copy has revision %d, want 33", copyDelivery, got[len(got)-1].Revision)
	}
}

// A copy killed (SIGKILL) midway, run again, ends with the source's log in the destination:
// every event once, in order.
func TestStoreCopyResumesAfterKill(t *testing.T) {
	src := commandtest.Log(t, 400) // 4,000 chained order events
	url := pgtest.Start(t).NewDatabase(t)
	pg := openCopyPostgres(t, url)

	cmd := exec.Command(os.Args[0], "store", "copy", "--from", src, "--to", url, "--batch", "4")
	cmd.Env = append(os.Environ(), runAPIEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() }) // if the test ends first; a no-op once killed
	// A position of the destination's log, anywhere in the copy's first half.
	killAt := 100 + rand.Uint64N(2000)
	t.Logf("killing the copy once the destination's head reaches %d", killAt)
	deadline := time.Now().Add(30 * time.Second)
	for {
		head, err := pg.Head(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if head.Commit >= killAt {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the copy ended before it was killed: %v", err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy wrote nothing in 30 s")
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited

	s := openCopySQLite(t, src)
	want := copyLogOf(t, s)
	s.Close()
	held := len(copyLogOf(t, pg))
	if held == 0 || held >= len(want) {
		t.Fatalf("killed after %d events of %d: want a copy cut short", held, len(want))
	}
	t.Logf("killed after %d events of %d", held, len(want))
	r := runCLI(t, "store", "copy", "--from", src, "--to", url)
	if r.err != nil || !strings.Contains(r.stdout, fmt.Sprintf("held the source's first %d events", held)) {
		t.Fatalf("copy again after the kill at %d events: %v\n%s", held, r.err, r.stdout)
	}
	if diff := cmp.Diff(want, copyLogOf(t, pg)); diff != "" {
		t.Errorf("the log of the copy differs from the source's (-source +copy):\n%s", diff)
	}
	copyVerify(t, "--store", "postgres", "--postgres-url", url)
}

// errCut is the failure of copyCutter's writes from its cut on.
var errCut = errors.New("cut")

// copyCutter is a destination that stops at its cut-th write (append, multi-stream append,
// truncate or delete), as a copy killed there would: the write is not made, or with after it is
// made but its answer is lost. Every write after it fails too; of writes made at once, those
// counted after it.
type copyCutter struct {
	*sqlite.Store
	mu          sync.Mutex
	cut, writes int
	after       bool
}

func (c *copyCutter) write(w func() error) error {
	c.mu.Lock()
	c.writes++
	n := c.writes
	c.mu.Unlock()
	if n < c.cut {
		return w()
	}
	if n == c.cut && c.after {
		w()
	}
	return errCut
}

func (c *copyCutter) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (res eventstore.AppendResult, err error) {
	err = c.write(func() error { res, err = c.Store.Append(ctx, stream, expected, events...); return err })
	return res, err
}

func (c *copyCutter) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) (res []eventstore.AppendResult, err error) {
	err = c.write(func() error { res, err = c.Store.MultiStreamAppend(ctx, appends...); return err })
	return res, err
}

func (c *copyCutter) Truncate(ctx context.Context, stream string, before uint64) error {
	return c.write(func() error { return c.Store.Truncate(ctx, stream, before) })
}

func (c *copyCutter) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	return c.write(func() error { return c.Store.DeleteStream(ctx, stream, expected) })
}

// A copy cut short at any of its writes (before the write, or after it with its answer lost),
// run again, ends with the source's log (with the source's positions, where the copy keeps
// them) and its streams, whatever it was doing: copying events, bringing a late stream to its
// first revision, truncating its placeholders, filling the positions of removed events.
func TestStoreCopyResumesAfterEveryWrite(t *testing.T) {
	ctx := context.Background()
	src := seedCopySource(t, 12)
	from := openCopySQLite(t, src)
	defer from.Close()
	want := copyLogOf(t, from)
	head, err := from.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string][]copiedEvent{}
	for _, name := range []string{copyDelivery, copyDead, copyRecreated, copyGone} {
		streams[name] = copyStreamOf(t, from, name)
	}
	for _, positions := range []bool{true, false} {
		for _, after := range []bool{false, true} {
			cuts := 0
			for cut := 1; ; cut++ {
				dst := &copyCutter{Store: openCopySQLite(t, t.TempDir()), cut: cut, after: after}
				_, err := newCopier(from, dst, 3, positions).run(ctx)
				if err == nil {
					dst.Close()
					break
				}
				if !errors.Is(err, errCut) {
					t.Fatalf("positions %v, cut at write %d (after: %v): %v", positions, cut, after, err)
				}
				cuts++
				st, err := newCopier(from, dst.Store, 3, positions).run(ctx)
				if err != nil {
					t.Fatalf("positions %v, cut at write %d (after: %v), copy again: %v", positions, cut, after, err)
				}
				got := copyLogOf(t, dst.Store)
				if !positions {
					got = copyWithPositions(got, want)
				} else if h, err := dst.Head(ctx); err != nil || h != head {
					t.Fatalf("cut at write %d (after: %v), copied again: the copy's head is %v (%v), the source's %v", cut, after, h, err, head)
				}
				if diff := cmp.Diff(want, got); diff != "" || st.held+st.events != uint64(len(want)) {
					t.Fatalf("positions %v, cut at write %d (after: %v), copied again: %d events held and %d copied of %d; the log differs from the source's (-source +copy):\n%s",
						positions, cut, after, st.held, st.events, len(want), diff)
				}
				for stream, events := range streams {
					if diff := cmp.Diff(events, copyWithPositions(copyStreamOf(t, dst.Store, stream), events)); diff != "" {
						t.Fatalf("positions %v, cut at write %d (after: %v): %s differs from the source's (-source +copy):\n%s", positions, cut, after, stream, diff)
					}
				}
				dst.Close()
			}
			t.Logf("positions %v: cut at each of %d writes (after them: %v), and copied again", positions, cuts, after)
		}
	}
}

// A log whose every order was written with an idempotency key that has since expired copies in
// as many writes as the same log before its keys expired, but for the deletes of the filler
// streams: the position of a removed event is filled in the append of the events after it,
// not by writes of its own. The copy is the source's log all the same, at its positions.
func TestStoreCopyWritesDoNotGrowWithExpiredKeys(t *testing.T) {
	ctx := context.Background()
	orders := commandtest.Log(t, 100) // 1,000 events
	writes := map[bool]int{}
	for _, expire := range []bool{false, true} {
		from := openCopySQLite(t, keysLog(t, orders, expire))
		dst := &copyCutter{Store: openCopySQLite(t, t.TempDir()), cut: math.MaxInt}
		if _, err := newCopier(from, dst, 64, true).run(ctx); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(copyLogOf(t, from), copyLogOf(t, dst.Store)); diff != "" {
			t.Errorf("keys expired %v: the log of the copy differs from the source's (-source +copy):\n%s", expire, diff)
		}
		writes[expire] = dst.writes
		dst.Close()
		from.Close()
	}
	t.Logf("writes of the copy: %d with the keys kept, %d with them expired", writes[false], writes[true])
	if writes[true] > writes[false]+fillerStreams {
		t.Errorf("the copy of the log whose keys expired made %d writes, of the log with its keys %d: want at most %d more, the deletes of the filler streams",
			writes[true], writes[false], fillerStreams)
	}
}

// copyWithPositions returns got with the positions of want, for a copy that does not keep them.
func copyWithPositions(got, want []copiedEvent) []copiedEvent {
	for i := range min(len(got), len(want)) {
		got[i].Position = want[i].Position
	}
	return got
}

// A destination that holds anything but a copy of the source's first events is refused, and
// nothing is written into it.
func TestStoreCopyRefusesAnotherLog(t *testing.T) {
	src := seedCopySource(t, 3)
	dir := t.TempDir()
	dst := openCopySQLite(t, dir)
	copyAppend(t, dst, "order-elsewhere", 1)
	before := copyLogOf(t, dst)
	dst.Close()

	r := runCLI(t, "store", "copy", "--from", src, "--to", dir)
	if r.err == nil || !strings.Contains(r.err.Error(), "the destination is not a copy of the source's first events: its event 1 (order-elsewhere@0") {
		t.Fatalf("copy into another log: %v\n%s", r.err, r.stdout)
	}
	dst = openCopySQLite(t, dir)
	defer dst.Close()
	if diff := cmp.Diff(before, copyLogOf(t, dst)); diff != "" {
		t.Errorf("the refused copy changed the destination (-before +after):\n%s", diff)
	}
}

// The command line's mistakes are refused before anything is opened, and a database password
// appears in no message.
func TestStoreCopyArguments(t *testing.T) {
	src := seedCopySource(t, 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", src, "--to", src}, "--from and --to name the same store"},
		{[]string{"--from", src, "--to", "mysql://x"}, `--to: unknown scheme "mysql"`},
		{[]string{"--from", "host=db password=s3cretpw", "--to", src}, "--from: give PostgreSQL as a postgres:// URL"},
		{[]string{"--from", filepath.Join(t.TempDir(), "none"), "--to", src}, "no event store in"},
		{[]string{"--from", src, "--to", t.TempDir(), "--batch", "0"}, "--batch 0: give 1 to 10000 events"},
		{[]string{"--from", "postgres://orders:s3cretpw@127.0.0.1:1/orders?sslmode=disable", "--to", t.TempDir()}, "open --from postgres://orders:xxxxx@127.0.0.1:1/orders"},
		{[]string{"--from", src, "--to", "postgresql://orders@127.0.0.1:1/orders?password=s3cretpw"}, "open --to postgresql://orders@127.0.0.1:1/orders?password=xxxxx"},
	} {
		r := runCLI(t, append([]string{"store", "copy"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || strings.Contains(r.err.Error()+r.stdout+r.stderr, "s3cretpw") {
			t.Errorf("store copy %s: %v\n%s%s\nwant an error with %q, and no password", strings.Join(tc.args, " "), r.err, r.stdout, r.stderr, tc.want)
		}
	}
	// A data directory that a service holds.
	release, err := lockData(src)
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "store", "copy", "--from", src, "--to", t.TempDir())
	release()
	if r.err == nil || !strings.Contains(r.err.Error(), "is in use by another api serve") {
		t.Errorf("store copy from a data directory in use: %v", r.err)
	}
	// The flags' environment variables, which keep a password out of the process list.
	r = runCLIWith(t, cliInput{env: map[string]string{"API_COPY_FROM": src, "API_COPY_TO": "postgres://orders:s3cretpw@127.0.0.1:1/orders"}}, "store", "copy")
	if r.err == nil || !strings.Contains(r.err.Error(), "open --to postgres://orders:xxxxx@127.0.0.1:1/orders") || strings.Contains(r.err.Error(), "s3cretpw") {
		t.Errorf("store copy with API_COPY_FROM and API_COPY_TO: %v", r.err)
	}
}

// BenchmarkStoreCopy copies 10,000 chained order events (1,000 orders) from the embedded store
// into PostgreSQL, with the default batch, and reports events/s:
//
//	go test ./cmd/api -run '^$' -bench StoreCopy -benchtime 3x
func BenchmarkStoreCopy(b *testing.B) {
	benchmarkStoreCopy(b, commandtest.Log(b, 1000))
}

// BenchmarkStoreCopyExpiredKeys copies the same 1,000 orders from a log in which each was
// written with the claim of an idempotency key of its own, in one append as the service writes a
// keyed create, and every key then expired and was deleted, as earlier releases deleted them: a
// removed position before each order. BenchmarkStoreCopyKeptKeys copies that log before the
// keys expired: the same positions, 11,000 events. Run with BenchmarkStoreCopy (-bench
// StoreCopy) to compare.
func BenchmarkStoreCopyExpiredKeys(b *testing.B) {
	benchmarkStoreCopy(b, keysLog(b, commandtest.Log(b, 1000), true))
}

func BenchmarkStoreCopyKeptKeys(b *testing.B) {
	benchmarkStoreCopy(b, keysLog(b, commandtest.Log(b, 1000), false))
}

// benchmarkStoreCopy copies the embedded store of src into PostgreSQL, with the default batch,
// and reports events/s.
func benchmarkStoreCopy(b *testing.B, src string) {
	server := pgtest.Start(b)
	ctx := context.Background()
	var events uint64
	for b.Loop() {
		b.StopTimer()
		from, err := sqlite.Open(src, sqlite.Config{})
		if err != nil {
			b.Fatal(err)
		}
		to, err := postgres.Open(ctx, server.NewDatabase(b), postgres.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := newCopier(from, to, 512, true).run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		events += st.events
		b.StopTimer()
		from.Close()
		to.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// keysLog returns the data directory of an embedded store holding the streams of the store of
// src, each appended whole with the claim of an idempotency key of its own, as the service
// appends a keyed create; with expire, each key is then deleted as earlier releases deleted one that
// expired. It is made on the first call and kept in the temporary directory for the next ones.
func keysLog(tb testing.TB, src string, expire bool) string {
	tb.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s-keyed-expired-%v", filepath.Base(src), expire))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	from := openCopySQLite(tb, src)
	defer from.Close()
	streams := map[string][]eventstore.RecordedEvent{}
	for e, err := range from.ReadAll(context.Background(), eventstore.ReadAllOptions{}) {
		if err != nil {
			tb.Fatal(err)
		}
		streams[e.Stream] = append(streams[e.Stream], e)
	}
	to := openCopySQLite(tb, dir)
	var wg sync.WaitGroup
	work := make(chan []eventstore.RecordedEvent)
	for range 16 { // the store's writer commits the appends of concurrent writers together
		wg.Go(func() {
			for events := range work {
				writeWithKeys(tb, to, events, expire)
			}
		})
	}
	for _, events := range streams {
		work <- events
	}
	close(work)
	wg.Wait()
	to.Close()
	if tb.Failed() {
		tb.FailNow() // not marked complete: made again by the next call
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// writeWithKeys appends the events of one stream to s with a key's claim, and with expire
// deletes the key.
func writeWithKeys(tb testing.TB, s *sqlite.Store, events []eventstore.RecordedEvent, expire bool) {
	ctx := context.Background()
	first := events[0]
	key := idempotency.StreamName("bench", first.Stream)
	claim, _ := json.Marshal(idempotency.Claimed{Principal: "bench", Key: first.Stream, Method: "POST",
		Path: "/v1/orders", OrderID: first.Stream, ClaimedAt: first.Recorded, ExpiresAt: first.Recorded.Add(24 * time.Hour)})
	_, err := s.MultiStreamAppend(ctx,
		eventstore.StreamAppend{Stream: key, Expected: eventstore.NoStream,
			Events: []eventstore.EventData{{ID: uuid.New(), Type: idempotency.TypeClaimed, Data: claim}}},
		eventstore.StreamAppend{Stream: first.Stream, Expected: expectedBefore(first.Revision), Events: eventData(events)})
	if err == nil && expire {
		err = s.DeleteStream(ctx, key, eventstore.Exact(0))
	}
	if err != nil {
		tb.Error(err)
	}
}
