package projections_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

// streams is a projection with a row per stream of one event, whose second version changes
// its output: it doubles the rows of streams a-*, drops b-* and adds c-*.
type streams struct{ v2 atomic.Bool }

func (*streams) Name() string              { return "streams" }
func (*streams) Version() int              { return 1 }
func (*streams) Filter() eventstore.Filter { return eventstore.Filter{} }
func (*streams) Tables() []string          { return []string{"streams"} }
func (*streams) Create(ctx context.Context, tx *sql.Tx, t projections.Tables) error {
	_, err := tx.ExecContext(ctx, `CREATE TABLE `+t["streams"]+` (stream TEXT PRIMARY KEY, n INTEGER NOT NULL, note TEXT) STRICT`)
	return err
}

func (p *streams) Apply(ctx context.Context, tx *sql.Tx, t projections.Tables, events []eventstore.RecordedEvent) error {
	v2 := p.v2.Load()
	for _, e := range events {
		n := 1
		switch {
		case v2 && strings.HasPrefix(e.Stream, "b-"), !v2 && strings.HasPrefix(e.Stream, "c-"):
			continue
		case v2 && strings.HasPrefix(e.Stream, "a-"):
			n = 2
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+t["streams"]+` (stream, n, note) VALUES (?, ?, 'same')`, e.Stream, n); err != nil {
			return err
		}
	}
	return nil
}

// runStreams runs a streams projection over a log of 1,234 a-* streams (over two pages of a
// comparison), 2 b-* and 3 c-*, and waits until it has applied them.
func runStreams(t *testing.T) (*projections.Runner, *streams, *sql.DB) {
	t.Helper()
	s, db := open(t, t.TempDir())
	p := &streams{}
	r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{p}, BatchSize: 100}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		db.Close()
		s.Close()
	})
	var head eventstore.Position
	for _, c := range []struct {
		prefix string
		n      int
	}{{"a-", 1234}, {"b-", 2}, {"c-", 3}} {
		for i := range c.n {
			res, err := s.Append(ctx, fmt.Sprintf("%s%05d", c.prefix, i), eventstore.NoStream, eventstore.EventData{ID: uuid.New(), Type: "test", Data: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			head = res.Position
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := r.WaitFor(wctx, p.Name(), head); err != nil {
		t.Fatal(err)
	}
	return r, p, db
}

// waitComparison waits until the projection's status holds a comparison and no rebuild.
func waitComparison(t *testing.T, r *projections.Runner) projections.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := r.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Comparison != nil && st[0].Rebuild == nil {
			return st[0]
		}
		if st[0].State == projections.StateFailed || time.Now().After(deadline) {
			t.Fatalf("no comparison: %+v", st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rowsOf is the projection's rows as its view shows them: stream → n.
func rowsOf(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT stream, n FROM streams`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

// A rebuild that compares counts the rows the projection's new output adds, removes and
// changes, with samples of them, and swaps only when asked to.
func TestRebuildComparesBeforeSwapping(t *testing.T) {
	r, p, db := runStreams(t)

	// The same code: nothing differs, and a dry run leaves the live generation.
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true}); err != nil {
		t.Fatal(err)
	}
	st := waitComparison(t, r)
	if c := st.Comparison; c.Added != 0 || c.Removed != 0 || c.Changed != 0 || len(c.Samples) != 0 || c.Swapped || st.Generation != 1 {
		t.Fatalf("unchanged projection compared as %+v, generation %d; want 0/0/0, not swapped, generation 1", c, st.Generation)
	}

	p.v2.Store(true)
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true}); err != nil {
		t.Fatal(err)
	}
	first := st.Comparison
	st = waitFor(t, r, func(s projections.Status) bool { return s.Comparison != first && s.Rebuild == nil })
	c := st.Comparison
	if c.Added != 3 || c.Removed != 2 || c.Changed != 1234 || c.Swapped || st.Generation != 1 {
		t.Errorf("compared as added %d, removed %d, changed %d, swapped %v, generation %d; want 3, 2, 1234, false, 1",
			c.Added, c.Removed, c.Changed, c.Swapped, st.Generation)
	}
	if len(c.Samples) != projections.MaxSamples {
		t.Fatalf("%d samples, want %d", len(c.Samples), projections.MaxSamples)
	}
	s0 := c.Samples[0]
	if s0.Table != "streams" || s0.Change != "changed" || s0.Key["stream"] != "a-00000" || len(s0.Columns) != 1 ||
		s0.Columns[0] != (projections.ColumnChange{Column: "n", Live: int64(1), Next: int64(2)}) {
		t.Errorf("first sample %+v; want a-00000's n changed from 1 to 2", s0)
	}
	if got := rowsOf(t, db); got["a-00000"] != 1 || len(got) != 1236 {
		t.Errorf("after a dry run the live rows are %d, a-00000 at %d; want the first version's", len(got), got["a-00000"])
	}

	// Asked to swap, it compares the same and then serves the new rows.
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true, Swap: true}); err != nil {
		t.Fatal(err)
	}
	second := c
	st = waitFor(t, r, func(s projections.Status) bool { return s.Comparison != second && s.Rebuild == nil })
	if c := st.Comparison; c.Added != 3 || c.Removed != 2 || c.Changed != 1234 || !c.Swapped || st.Generation != 2 {
		t.Errorf("compared and swapped as %+v, generation %d; want 3/2/1234, swapped, generation 2", c, st.Generation)
	}
	if got := rowsOf(t, db); got["a-00000"] != 2 || len(got) != 1237 {
		t.Errorf("after the swap the live rows are %d, a-00000 at %d; want the second version's", len(got), got["a-00000"])
	}
}

// waitFor waits until the projection's status satisfies ok.
func waitFor(t *testing.T, r *projections.Runner, ok func(projections.Status) bool) projections.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := r.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok(st[0]) {
			return st[0]
		}
		if st[0].State == projections.StateFailed || time.Now().After(deadline) {
			t.Fatalf("status %+v", st[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A rebuild asked to do something else than the one running is refused; the same joins it.
func TestRebuildWithOtherOptionsIsRefused(t *testing.T) {
	r, _, _ := runStreams(t)
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true}); err != nil {
		t.Errorf("the same request again: %v; want it to join", err)
	}
	// The dry run of 1,239 events takes 13 steps: it is still asked for or running.
	if err := r.Rebuild("streams"); !errors.Is(err, projections.ErrRebuildRunning) {
		t.Errorf("a rebuild to swap during a dry run: %v; want ErrRebuildRunning", err)
	}
	if st := waitComparison(t, r); st.Generation != 1 {
		t.Errorf("generation %d after a dry run; want 1", st.Generation)
	}
}

// startStreams runs a runner of p on db and feed until the test ends or stop is called.
func startStreams(t *testing.T, db *sql.DB, feed eventstore.Feed, p *streams) (*projections.Runner, func()) {
	t.Helper()
	r := &projections.Runner{DB: db, Feed: feed, Projections: []projections.Projection{p}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Started()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return r, stop
}

// A dry run interrupted by a restart resumes as a dry run: it compares and never swaps.
func TestDryRunResumedAfterRestartNeverSwaps(t *testing.T) {
	s, db := open(t, t.TempDir())
	t.Cleanup(func() { db.Close(); s.Close() })
	p := &streams{}
	r, stop := startStreams(t, db, s, p)
	var head eventstore.Position
	for i := range 10 {
		res, err := s.Append(context.Background(), fmt.Sprintf("a-%05d", i), eventstore.NoStream, eventstore.EventData{ID: uuid.New(), Type: "test", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		head = res.Position
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, "streams", head); err != nil {
		t.Fatal(err)
	}
	stop()

	p.v2.Store(true) // a swap would show in the rows
	gated := gatedFeed{Feed: s, open: make(chan struct{})}
	r, stop = startStreams(t, db, gated, p)
	if err := r.RebuildWith("streams", projections.RebuildOptions{Compare: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, func(s projections.Status) bool { return s.Rebuild != nil })
	stop() // before the rebuild has read the log

	r, _ = startStreams(t, db, s, p)
	if st := statusOf(t, r, "streams"); st.Rebuild == nil || !st.Rebuild.Compare || st.Rebuild.Swap {
		t.Fatalf("after a restart: %+v %+v; want the dry run resumed", st, st.Rebuild)
	}
	st := waitComparison(t, r)
	if c := st.Comparison; c.Changed != 10 || c.Swapped || st.Generation != 1 {
		t.Errorf("resumed dry run: %+v, generation %d; want 10 changed, not swapped, generation 1", c, st.Generation)
	}
	if got := rowsOf(t, db); got["a-00000"] != 1 {
		t.Errorf("a-00000 at %d after the dry run; want the live generation's 1", got["a-00000"])
	}
}
