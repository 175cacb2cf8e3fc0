package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acme/orders/eventstore"
)

// Runner runs projections. Set DB, Feed and Projections, then call Run.
type Runner struct {
	DB          *sql.DB // the read-model database
	Feed        eventstore.Feed
	Projections []Projection
	// BatchSize caps the events applied per transaction while a projection is live; 0 means
	// 1000. Catching up, it applies up to ten times as many, for fewer commits.
	BatchSize int
	// Linger is how long a live projection keeps gathering events after the first of a batch
	// arrives, so that one transaction applies many: under load it otherwise commits every few
	// events, and the commits were near half of its work. 0 means 50 ms; a negative value
	// applies at once. Readers do not pay for it: a projection does not linger while a WaitFor
	// waits on it.
	Linger time.Duration
	Log    *slog.Logger

	runs    map[string]*run
	started chan struct{}
	once    sync.Once

	// writer is the one connection every write of the runner goes through, one transaction
	// at a time (writeMu). SQLite has one writer anyway; with a connection each, the
	// projections took turns by the busy handler's retries, and each found its page cache
	// emptied by the others' commits. Queries and comparisons read on the pool.
	writeMu sync.Mutex
	writer  *sql.Conn
}

// ErrUnknownProjection: no projection has that name.
var ErrUnknownProjection = errors.New("unknown projection")

func (r *Runner) init() {
	r.once.Do(func() {
		r.runs = map[string]*run{}
		r.started = make(chan struct{})
		for _, p := range r.Projections {
			r.runs[p.Name()] = &run{r: r, p: p, state: StateCatchingUp, rebuildReq: make(chan struct{}, 1),
				advanced: make(chan struct{}), hurry: make(chan struct{}), applies: applies(p)}
		}
	})
}

func (r *Runner) batchSize() int {
	if r.BatchSize > 0 {
		return r.BatchSize
	}
	return 1000
}

// defaultLinger is several of the event store's commits under load (one every ~7 ms), so a
// live batch gathers several commits' events, yet short beside the 2 s a read waits for a read
// model; and reads that wait for a position cut it short anyway.
const defaultLinger = 50 * time.Millisecond

func (r *Runner) lingerTime() time.Duration {
	if r.Linger == 0 {
		return defaultLinger
	}
	return r.Linger
}

func (r *Runner) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// Run prepares the database and runs every projection until ctx ends. A projection that
// fails stops alone; Run returns when ctx ends or the database cannot be prepared.
func (r *Runner) Run(ctx context.Context) error {
	r.init()
	writer, err := r.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	defer writer.Close()
	r.writer = writer
	if err := r.prepare(ctx); err != nil {
		return err
	}
	close(r.started)
	// One follower of the log feeds every projection: each skips what it has applied.
	var from eventstore.Position
	feeds := make([]*feed, 0, len(r.runs))
	var wg sync.WaitGroup
	for i, p := range r.Projections {
		rn := r.runs[p.Name()]
		rn.mu.Lock()
		if i == 0 || rn.checkpoint.Compare(from) < 0 {
			from = rn.checkpoint
		}
		rn.mu.Unlock()
		f := &feed{events: make(chan eventstore.RecordedEvent, 10*r.batchSize()), failed: make(chan error, 1), gone: make(chan struct{})}
		feeds = append(feeds, f)
		wg.Go(func() {
			defer close(f.gone)
			rn.loop(ctx, f)
		})
	}
	followCtx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		r.follow(followCtx, from, feeds)
	}()
	wg.Wait()
	stopFollow()
	<-followed
	return nil
}

// feed is one projection's share of the log follower.
type feed struct {
	events chan eventstore.RecordedEvent
	failed chan error    // the follower gave up
	gone   chan struct{} // closed when the projection's loop has returned: nothing more is sent
}

// Started is closed once Run has prepared the database.
func (r *Runner) Started() <-chan struct{} {
	r.init()
	return r.started
}

// run is one projection's runner.
type run struct {
	r *Runner
	p Projection

	mu         sync.Mutex
	generation int
	checkpoint eventstore.Position
	lastAt     time.Time // recorded time of the last event applied
	// outdated: the live generation is of another Version, which Apply cannot write nor
	// queries read. It serves nothing until its rebuild is swapped in.
	outdated   bool
	rebuildAt  time.Time // recorded time of the last event a rebuild applied
	state      State
	err        error
	rebuild    *RebuildStatus
	rebuildReq chan struct{}
	requested  RebuildOptions // of the rebuild rebuildReq asks for
	comparison *Comparison    // the last one
	advanced   chan struct{}  // closed and replaced when the checkpoint moves
	waiters    int            // WaitFor calls waiting for the checkpoint to move
	hurry      chan struct{}  // closed and replaced when waiters becomes 1: a linger stops

	fresh   []eventstore.RecordedEvent // applyLive's array, reused from batch to batch
	applies func(typ string) bool      // see Selective
	unsaved int                        // events passed since the checkpoint was stored: see skip
}

// statementContext is ctx without its cancellation, for the statements of a batch. The driver
// runs each statement under a context that can end on a goroutine of its own, to interrupt it:
// per statement, that cost more than the statement. A batch takes milliseconds; the loop
// checks ctx between batches.
func statementContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func (rn *run) tx(ctx context.Context, f func(*sql.Tx) error) error {
	return rn.r.tx(ctx, f)
}

// tx runs f in a transaction on the writer connection and commits it, or rolls it back if f
// fails.
func (r *Runner) tx(ctx context.Context, f func(*sql.Tx) error) error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	tx, err := r.writer.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// follow feeds every projection's live loop from the log (eventstore.Follow); a projection
// whose loop has returned is skipped. If the store closes, every loop is told.
func (r *Runner) follow(ctx context.Context, after eventstore.Position, feeds []*feed) {
	dropped := func(err error) { r.log().Warn("projection subscription dropped; resubscribing", "error", err) }
	err := eventstore.Follow(ctx, r.Feed, eventstore.SubscribeOptions{After: after}, dropped, func(e eventstore.RecordedEvent) error {
		for _, f := range feeds {
			select {
			case f.events <- e:
			case <-f.gone:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	if ctx.Err() == nil {
		for _, f := range feeds {
			f.failed <- err
		}
	}
}
