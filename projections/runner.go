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

// Projection is a read model kept from the log.
type Projection interface {
	// Name identifies the projection; it is stored with its checkpoint.
	Name() string
	// Version numbers what its tables look like and hold. Raise it whenever Create or Apply
	// change either: a runner that finds the live generation written at another version
	// rebuilds it from the log (see the package doc).
	Version() int
	// Filter selects the events it applies. The runner still reads every event, so that its
	// checkpoint passes the others too and WaitFor can tell when it has seen a position.
	Filter() eventstore.Filter
	// Tables are the base names of its tables; queries read them under these names.
	Tables() []string
	// Create creates its tables, named by t, and their indexes (whose names must contain
	// the table names, so that generations do not collide).
	Create(ctx context.Context, tx *sql.Tx, t Tables) error
	// Apply applies a batch of events, in log order, to the tables named by t. The slice is
	// the runner's, reused for the next batch: Apply must not keep it.
	Apply(ctx context.Context, tx *sql.Tx, t Tables, events []eventstore.RecordedEvent) error
}

// Selective is a Projection that folds only some event types of the streams its Filter
// selects. The runner hands Apply only those, and a live batch without any commits nothing:
// the checkpoint moves in memory, and reaches the file with the next batch that writes, or
// once ten BatchSizes of events have passed so (see run.skip). A restart applies from the
// stored checkpoint, so it meets the events skipped since then again, and skips them again.
type Selective interface {
	Projection
	// Applies reports whether Apply folds events of type typ. It must hold for every version
	// of a type Apply folds, so that one this build cannot read reaches Apply and stops the
	// projection instead of being skipped.
	Applies(typ string) bool
}

// applies returns p's Applies, or one that takes every type.
func applies(p Projection) func(string) bool {
	if s, ok := p.(Selective); ok {
		return s.Applies
	}
	return func(string) bool { return true }
}

// Tables maps a projection's table base names to the tables of one generation.
type Tables map[string]string

func tablesOf(p Projection, generation int) Tables {
	t := Tables{}
	for _, name := range p.Tables() {
		t[name] = fmt.Sprintf("%s_g%d", name, generation)
	}
	return t
}

// State is what a projection is doing.
type State string

const (
	StateCatchingUp State = "catching-up"
	StateLive       State = "live"
	StateRebuilding State = "rebuilding"
	StateFailed     State = "failed"
	StateStopped    State = "stopped"
)

// Status is a projection's progress.
type Status struct {
	Name       string              `json:"name"`
	State      State               `json:"state"`
	Error      string              `json:"error,omitempty"`
	Generation int                 `json:"generation"`
	Checkpoint eventstore.Position `json:"-"`
	Head       eventstore.Position `json:"-"`
	// LagEvents approximates the events between checkpoint and head by their positions,
	// which are gap-tolerant sequence numbers on the embedded store.
	LagEvents  uint64  `json:"lagEvents"`
	LagSeconds float64 `json:"lagSeconds"`
	// Rebuild is the progress of a rebuild in progress.
	Rebuild *RebuildStatus `json:"rebuild,omitempty"`
	// Comparison is the last comparison of a rebuild asked to compare (see RebuildOptions)
	// since the process started.
	Comparison *Comparison `json:"comparison,omitempty"`
}

// RebuildStatus is the progress of a rebuild.
type RebuildStatus struct {
	Generation int                 `json:"generation"`
	Checkpoint eventstore.Position `json:"-"`
	Applied    uint64              `json:"applied"` // events applied by this process's run of it
	Started    time.Time           `json:"started"`
	RebuildOptions
}

// RebuildOptions say what a rebuild does once its generation has caught up with the live one.
type RebuildOptions struct {
	// Compare compares the two generations' rows first (see Comparison), at the same log
	// position: the result is in the projection's Status.
	Compare bool `json:"compare"`
	// Swap makes the rebuilt generation live. A compared generation that is not swapped is
	// dropped: the live one stays as it was (a dry run). A rebuild that does not compare
	// always swaps.
	Swap bool `json:"swap"`
}

// mode is how RebuildOptions are stored with a rebuild in progress, so that a resumed rebuild
// does what was asked (NULL: swap without comparing, as rebuilds from before options did).
func (o RebuildOptions) mode() any {
	switch {
	case !o.Compare:
		return nil
	case o.Swap:
		return "compare-swap"
	}
	return "compare"
}

func optionsOf(mode sql.NullString) RebuildOptions {
	return RebuildOptions{Compare: mode.Valid, Swap: !mode.Valid || mode.String == "compare-swap"}
}

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

const metaSchema = `CREATE TABLE IF NOT EXISTS projection_checkpoints (
	name              TEXT PRIMARY KEY,
	generation        INTEGER NOT NULL,
	commit_position   INTEGER NOT NULL,
	prepare_position  INTEGER NOT NULL,
	shadow_generation INTEGER,          -- a rebuild in progress
	shadow_commit     INTEGER,
	shadow_prepare    INTEGER,
	version           INTEGER NOT NULL DEFAULT 1, -- the projection's Version of the live generation
	shadow_version    INTEGER,                    -- and of the rebuild's
	shadow_mode       TEXT                        -- RebuildOptions.mode
) STRICT`

// prepare creates the checkpoint table, and generation 1 of every new projection, and starts
// the rebuild of every projection whose live generation is of another version.
func (r *Runner) prepare(ctx context.Context) error {
	if _, err := r.DB.ExecContext(ctx, metaSchema); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	if err := addVersions(ctx, r.DB); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	if err := addColumn(ctx, r.DB, "shadow_mode", "TEXT"); err != nil {
		return fmt.Errorf("prepare projections: %w", err)
	}
	for _, rn := range r.runs {
		if err := rn.load(ctx); err != nil {
			return err
		}
	}
	return nil
}

// addVersions adds the version columns to a checkpoint table from before projections had
// versions: every generation in it was written at version 1.
func addVersions(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('projection_checkpoints') WHERE name = 'version'`).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN version INTEGER NOT NULL DEFAULT 1`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN shadow_version INTEGER`); err != nil {
		return err
	}
	return tx.Commit()
}

// addColumn adds a column to a checkpoint table from before it had it.
func addColumn(ctx context.Context, db *sql.DB, name, decl string) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('projection_checkpoints') WHERE name = ?`, name).Scan(&n)
	if err != nil || n > 0 {
		return err
	}
	_, err = db.ExecContext(ctx, `ALTER TABLE projection_checkpoints ADD COLUMN `+name+` `+decl)
	return err
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

// load reads the projection's checkpoint, or creates its first generation. A live generation
// of another version is rebuilt at once; so is a rebuild in progress that another version
// started, since its tables are not this version's either.
func (rn *run) load(ctx context.Context) error {
	gen, version, shadowVersion := 1, rn.p.Version(), 0
	var c, p uint64
	var sg, sc, sp sql.NullInt64
	var mode sql.NullString
	err := rn.r.DB.QueryRowContext(ctx, `SELECT generation, commit_position, prepare_position, version,
		shadow_generation, shadow_commit, shadow_prepare, coalesce(shadow_version, 1), shadow_mode FROM projection_checkpoints WHERE name = ?`, rn.p.Name()).
		Scan(&gen, &c, &p, &version, &sg, &sc, &sp, &shadowVersion, &mode)
	if errors.Is(err, sql.ErrNoRows) {
		err = rn.tx(ctx, func(tx *sql.Tx) error {
			if err := rn.createGeneration(ctx, tx, gen); err != nil {
				return err
			}
			if err := pointViews(ctx, tx, rn.p, gen); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO projection_checkpoints (name, generation, commit_position, prepare_position, version)
				VALUES (?, ?, 0, 0, ?)`, rn.p.Name(), gen, version)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("projection %s: %w", rn.p.Name(), err)
	}
	rn.mu.Lock()
	rn.generation = gen
	rn.checkpoint = eventstore.Position{Commit: c, Prepare: p}
	rn.outdated = version != rn.p.Version()
	resume := sg.Valid && shadowVersion == rn.p.Version()
	if resume {
		rn.rebuild = &RebuildStatus{Generation: int(sg.Int64), Checkpoint: eventstore.Position{Commit: uint64(sc.Int64), Prepare: uint64(sp.Int64)},
			Started: time.Now(), RebuildOptions: optionsOf(mode)}
		rn.state = StateRebuilding
	}
	rn.mu.Unlock()
	switch {
	case resume:
		return nil
	case sg.Valid:
		rn.r.log().Info("projection rebuild started by another version; starting it again", "projection", rn.p.Name(),
			"version", shadowVersion, "want", rn.p.Version())
	case rn.outdated:
		rn.r.log().Info("projection written by another version; rebuilding it", "projection", rn.p.Name(),
			"version", version, "want", rn.p.Version())
	default:
		return nil
	}
	// The live generation is not this version's: the rebuild replaces it, whatever the one
	// started by another version was asked to do.
	if err := rn.startRebuild(ctx, RebuildOptions{Swap: true}); err != nil {
		return fmt.Errorf("projection %s: %w", rn.p.Name(), err)
	}
	return nil
}

func (rn *run) createGeneration(ctx context.Context, tx *sql.Tx, gen int) error {
	t := tablesOf(rn.p, gen)
	for _, name := range t {
		if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+name); err != nil {
			return err
		}
	}
	return rn.p.Create(ctx, tx, t)
}

// pointViews makes each base name a view of generation gen's table.
func pointViews(ctx context.Context, tx *sql.Tx, p Projection, gen int) error {
	for base, table := range tablesOf(p, gen) {
		if _, err := tx.ExecContext(ctx, `DROP VIEW IF EXISTS `+base); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `CREATE VIEW `+base+` AS SELECT * FROM `+table); err != nil {
			return err
		}
	}
	return nil
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

// loop follows the log and, when asked, rebuilds, until ctx ends or a handler fails.
func (rn *run) loop(ctx context.Context, f *feed) {
	events, followErr := f.events, f.failed

	batch := make([]eventstore.RecordedEvent, 0, 10*rn.r.batchSize())
	for {
		batch = batch[:0]
		rn.mu.Lock()
		rebuilding := rn.rebuild != nil
		rn.mu.Unlock()
		if rebuilding {
			// Rebuild steps run between live batches: the live model keeps up meanwhile.
			var done bool
			err := rn.retry(ctx, func() (err error) {
				done, err = rn.rebuildStep(ctx)
				if err != nil {
					err = fmt.Errorf("rebuild: %w", err)
				}
				return err
			})
			if err != nil {
				rn.setState(StateStopped, nil)
				return
			}
			if !done {
				if !rn.waitLive(ctx, events, &batch) {
					rn.setState(StateStopped, nil)
					return
				}
			}
		}
		if len(batch) == 0 && !rebuilding {
			select {
			case e := <-events:
				batch = append(batch, e)
			case <-rn.rebuildReq:
				if err := rn.startRequested(ctx); err != nil {
					rn.fail(ctx, err)
					return
				}
				continue
			case err := <-followErr:
				rn.fail(ctx, fmt.Errorf("follow the log: %w", err))
				return
			case <-ctx.Done():
				rn.setState(StateStopped, nil)
				return
			}
		}
		if !rebuilding {
			// Not during a rebuild: its next step waits for this batch.
			batch = rn.linger(ctx, events, batch)
		}
	drain:
		for len(batch) > 0 && len(batch) < cap(batch) {
			select {
			case e := <-events:
				batch = append(batch, e)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := rn.retry(ctx, func() error { return rn.applyLive(ctx, batch, len(events) == 0) }); err != nil {
			rn.setState(StateStopped, nil)
			return
		}
	}
}

// linger gathers events into batch, which holds the first of a live batch, until it holds
// BatchSize events or the Runner's Linger has passed, so that one transaction applies them all.
// It does not wait when a full batch is already waiting (catching up), and never keeps a reader
// waiting: it does not start while a WaitFor waits on the projection and stops when one starts
// to. When ctx ends it returns what it has, which is applied like any batch (a batch's
// statements do not watch ctx: see statementContext); the loop stops after it.
func (rn *run) linger(ctx context.Context, events <-chan eventstore.RecordedEvent, batch []eventstore.RecordedEvent) []eventstore.RecordedEvent {
	d, full := rn.r.lingerTime(), rn.r.batchSize()
	rn.mu.Lock()
	waited, hurry := rn.waiters > 0, rn.hurry
	rn.mu.Unlock()
	if d < 0 || waited || len(batch)+len(events) >= full {
		return batch
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(batch) < full {
		select {
		case e := <-events:
			batch = append(batch, e)
		case <-hurry:
			return batch
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
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

// applyLive applies batch to the live generation with its checkpoint, skipping events at or
// before the checkpoint (a rebuild that took over may already have applied them).
func (rn *run) applyLive(ctx context.Context, batch []eventstore.RecordedEvent, caughtUp bool) error {
	rn.mu.Lock()
	gen, cp, outdated := rn.generation, rn.checkpoint, rn.outdated
	rn.mu.Unlock()
	last := batch[len(batch)-1]
	if last.Position.Compare(cp) <= 0 {
		return nil
	}
	filter, applies := rn.p.Filter(), rn.applies
	fresh := rn.fresh[:0]
	for _, e := range batch {
		if e.Position.Compare(cp) > 0 && filter.Match(e.Stream) && applies(e.Type) {
			fresh = append(fresh, e)
		}
	}
	rn.fresh = fresh
	ctx = statementContext(ctx)
	if len(fresh) == 0 || outdated {
		return rn.skip(ctx, last, len(batch), caughtUp, outdated)
	}
	defer clear(fresh) // let the events' bytes go with the batch
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := rn.p.Apply(ctx, tx, tablesOf(rn.p, gen), fresh); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET commit_position = ?, prepare_position = ? WHERE name = ?`,
			last.Position.Commit, last.Position.Prepare, rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("apply events %v..%v: %w", fresh[0].Position, fresh[len(fresh)-1].Position, err)
	}
	rn.unsaved = 0
	rn.advance(last, caughtUp)
	return nil
}

// unsavedEvents bounds the events a projection passes without storing its checkpoint, when
// none of them is its to apply: ten BatchSizes (10,000 by default), the most a batch holds
// while catching up. A restart reads at most that many again.
func (r *Runner) unsavedEvents() int { return 10 * r.batchSize() }

// skip moves the checkpoint past a batch of n events with nothing to apply, without a write,
// except that once unsavedEvents have passed so it stores the checkpoint alone. Nothing is
// written for an outdated generation, which Apply cannot write (its rebuild reads these events
// from the log).
func (rn *run) skip(ctx context.Context, last eventstore.RecordedEvent, n int, caughtUp, outdated bool) error {
	if rn.unsaved += n; rn.unsaved >= rn.r.unsavedEvents() && !outdated {
		err := rn.tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET commit_position = ?, prepare_position = ? WHERE name = ?`,
				last.Position.Commit, last.Position.Prepare, rn.p.Name())
			return err
		})
		if err != nil {
			return fmt.Errorf("store checkpoint %v: %w", last.Position, err)
		}
		rn.unsaved = 0
	}
	rn.advance(last, caughtUp)
	return nil
}

func (rn *run) advance(last eventstore.RecordedEvent, caughtUp bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.checkpoint, rn.lastAt = last.Position, last.Recorded
	if rn.state == StateCatchingUp || rn.state == StateLive {
		rn.state = StateCatchingUp
		if caughtUp {
			rn.state = StateLive
		}
	}
	close(rn.advanced)
	rn.advanced = make(chan struct{})
}

// retry runs step until it succeeds or ctx ends. While it fails the projection is failed, with
// the error in its status, and applies nothing: it never skips an event. A failure that
// passes (a full disk, a locked file) heals by itself; one that does not (a handler that
// cannot apply an event) stays visible until the projection or the event is fixed.
func (rn *run) retry(ctx context.Context, step func() error) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		err := step()
		if err == nil {
			rn.mu.Lock()
			if rn.state == StateFailed {
				rn.state, rn.err = StateCatchingUp, nil
				if rn.rebuild != nil {
					rn.state = StateRebuilding
				}
				rn.r.log().Info("projection recovered", "projection", rn.p.Name())
			}
			rn.mu.Unlock()
			return nil
		}
		rn.fail(ctx, err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (rn *run) setState(s State, err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.state, rn.err = s, err
}

func (rn *run) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		rn.setState(StateStopped, nil)
		return
	}
	rn.r.log().Error("projection failed", "projection", rn.p.Name(), "error", err)
	rn.setState(StateFailed, err)
}

// Rebuild starts rebuilding the named projection, to swap it in (or starts nothing if such a
// rebuild is running).
func (r *Runner) Rebuild(name string) error {
	return r.RebuildWith(name, RebuildOptions{Swap: true})
}

// ErrRebuildRunning: a rebuild asked to do something else is running.
var ErrRebuildRunning = errors.New("another rebuild is running")

// RebuildWith starts rebuilding the named projection with opts. A request while a rebuild
// with the same options runs, or is asked for, joins it; with other options it fails with
// ErrRebuildRunning.
func (r *Runner) RebuildWith(name string, opts RebuildOptions) error {
	r.init()
	rn, ok := r.runs[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProjection, name)
	}
	if !opts.Compare {
		opts.Swap = true
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	running := rn.rebuild
	if running == nil && len(rn.rebuildReq) > 0 {
		running = &RebuildStatus{RebuildOptions: rn.requested}
	}
	switch {
	case running != nil && running.RebuildOptions == opts:
		return nil // a request during a rebuild joins it
	case running != nil:
		return fmt.Errorf("%w: projection %s is rebuilding with %+v", ErrRebuildRunning, name, running.RebuildOptions)
	}
	rn.requested = opts
	rn.rebuildReq <- struct{}{} // room: the channel holds one and was empty
	return nil
}

// startRequested starts the rebuild that rebuildReq asked for.
func (rn *run) startRequested(ctx context.Context) error {
	rn.mu.Lock()
	opts := rn.requested
	rn.mu.Unlock()
	return rn.startRebuild(ctx, opts)
}

func (rn *run) startRebuild(ctx context.Context, opts RebuildOptions) error {
	rn.mu.Lock()
	if rn.rebuild != nil {
		rn.mu.Unlock()
		return nil
	}
	gen := rn.generation + 1
	rn.mu.Unlock()
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := rn.createGeneration(ctx, tx, gen); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_generation = ?, shadow_commit = 0, shadow_prepare = 0,
			shadow_version = ?, shadow_mode = ? WHERE name = ?`, gen, rn.p.Version(), opts.mode(), rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("start rebuild: %w", err)
	}
	rn.mu.Lock()
	rn.rebuild = &RebuildStatus{Generation: gen, Started: time.Now(), RebuildOptions: opts}
	rn.state = StateRebuilding
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuild started", "projection", rn.p.Name(), "generation", gen)
	return nil
}

// rebuildStep applies one batch of the log to the shadow generation; once the shadow has
// caught up with the live checkpoint it swaps the generations. It reports whether the rebuild
// is done.
func (rn *run) rebuildStep(ctx context.Context) (bool, error) {
	rn.mu.Lock()
	rb := *rn.rebuild
	rn.mu.Unlock()
	// ReadAll's From is inclusive: the event at the checkpoint comes again and is skipped.
	var batch []eventstore.RecordedEvent
	var last eventstore.RecordedEvent
	read := 0
	filter := rn.p.Filter()
	// One live batch's worth per step: live events wait for each step, so steps stay short.
	limit := rn.r.batchSize()
	for e, err := range rn.r.Feed.ReadAll(ctx, eventstore.ReadAllOptions{From: rb.Checkpoint, Limit: uint64(limit)}) {
		if err != nil {
			return false, err
		}
		read++
		if e.Position.Compare(rb.Checkpoint) > 0 {
			last = e
			if filter.Match(e.Stream) && rn.applies(e.Type) {
				batch = append(batch, e)
			}
		}
	}
	if last.Position.Compare(rb.Checkpoint) > 0 {
		ctx := statementContext(ctx)
		err := rn.tx(ctx, func(tx *sql.Tx) error {
			if err := rn.p.Apply(ctx, tx, tablesOf(rn.p, rb.Generation), batch); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_commit = ?, shadow_prepare = ? WHERE name = ?`,
				last.Position.Commit, last.Position.Prepare, rn.p.Name())
			return err
		})
		if err != nil {
			return false, err
		}
		rn.mu.Lock()
		rn.rebuild.Checkpoint, rn.rebuildAt = last.Position, last.Recorded
		rn.rebuild.Applied += uint64(len(batch))
		rb = *rn.rebuild
		rn.mu.Unlock()
	}
	rn.mu.Lock()
	live := rn.checkpoint
	rn.mu.Unlock()
	if read == limit || rb.Checkpoint.Compare(live) < 0 {
		return false, nil // not caught up yet
	}
	if !rb.Compare {
		return true, rn.swap(ctx, rb)
	}
	if rb.Checkpoint.Compare(live) > 0 {
		return false, nil // the live generation has yet to apply what the rebuild has: see waitLive
	}
	return true, rn.finishCompared(ctx, rb)
}

// waitLive takes the next live event into batch. It waits for one only while a rebuild that
// compares is ahead of the live generation, which must reach the same position first; else
// it takes one if one is there, so that the rebuild's next step comes at once. It reports
// false when ctx ends.
func (rn *run) waitLive(ctx context.Context, events <-chan eventstore.RecordedEvent, batch *[]eventstore.RecordedEvent) bool {
	rn.mu.Lock()
	ahead := rn.rebuild != nil && rn.rebuild.Compare && rn.rebuild.Checkpoint.Compare(rn.checkpoint) > 0
	rn.mu.Unlock()
	if !ahead {
		select {
		case e := <-events:
			*batch = append(*batch, e)
		default:
		}
		return true
	}
	select {
	case e := <-events:
		*batch = append(*batch, e)
		return true
	case <-ctx.Done():
		return false
	}
}

// finishCompared compares the rebuilt generation with the live one, both at rb.Checkpoint,
// then swaps it in or drops it, as the rebuild was asked. Both happen in the projection's
// loop, between live batches: neither generation moves while they are compared.
func (rn *run) finishCompared(ctx context.Context, rb RebuildStatus) error {
	rn.mu.Lock()
	live := rn.generation
	rn.mu.Unlock()
	c, err := compareGenerations(ctx, rn.r.DB, rn.p, live, rb.Generation)
	if err != nil {
		return err
	}
	c.At, c.Started, c.Swapped = rb.Checkpoint, rb.Started, rb.Swap
	if rb.Swap {
		err = rn.swap(ctx, rb)
	} else {
		err = rn.dropRebuild(ctx, rb)
	}
	if err != nil {
		return err
	}
	c.Finished = time.Now()
	rn.mu.Lock()
	rn.comparison = &c
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuild compared", "projection", rn.p.Name(), "generation", rb.Generation,
		"added", c.Added, "removed", c.Removed, "changed", c.Changed, "swapped", c.Swapped)
	return nil
}

// dropRebuild drops the rebuilt generation, leaving the live one as it is.
func (rn *run) dropRebuild(ctx context.Context, rb RebuildStatus) error {
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		for _, table := range tablesOf(rn.p, rb.Generation) {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_generation = NULL, shadow_commit = NULL,
			shadow_prepare = NULL, shadow_version = NULL, shadow_mode = NULL WHERE name = ?`, rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("drop rebuilt generation: %w", err)
	}
	rn.mu.Lock()
	rn.rebuild, rn.state = nil, StateLive
	rn.mu.Unlock()
	return nil
}

// swap makes the rebuilt generation live, in one transaction.
func (rn *run) swap(ctx context.Context, rb RebuildStatus) error {
	rn.mu.Lock()
	old := rn.generation
	rn.mu.Unlock()
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := pointViews(ctx, tx, rn.p, rb.Generation); err != nil {
			return err
		}
		for _, table := range tablesOf(rn.p, old) {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET generation = ?, commit_position = ?, prepare_position = ?,
			version = ?, shadow_generation = NULL, shadow_commit = NULL, shadow_prepare = NULL, shadow_version = NULL, shadow_mode = NULL
			WHERE name = ?`,
			rb.Generation, rb.Checkpoint.Commit, rb.Checkpoint.Prepare, rn.p.Version(), rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("swap generations: %w", err)
	}
	rn.mu.Lock()
	rn.generation, rn.rebuild, rn.state, rn.outdated = rb.Generation, nil, StateLive, false
	if rb.Checkpoint.Compare(rn.checkpoint) > 0 {
		rn.checkpoint = rb.Checkpoint
	}
	close(rn.advanced)
	rn.advanced = make(chan struct{})
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuilt", "projection", rn.p.Name(), "generation", rb.Generation, "events", rb.Applied)
	return nil
}

// Status reports every projection, in the order given.
func (r *Runner) Status(ctx context.Context) ([]Status, error) {
	r.init()
	head, err := r.Feed.Head(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(r.Projections))
	for _, p := range r.Projections {
		rn := r.runs[p.Name()]
		rn.mu.Lock()
		cp, lastAt := rn.checkpoint, rn.lastAt
		if rn.outdated && rn.rebuild != nil {
			// What it will serve first is the rebuild's: the live generation serves nothing.
			cp, lastAt = rn.rebuild.Checkpoint, rn.rebuildAt
		}
		s := Status{Name: p.Name(), State: rn.state, Generation: rn.generation, Checkpoint: cp, Head: head}
		if s.State == StateCatchingUp && cp.Compare(head) >= 0 {
			s.State = StateLive // nothing arrived since it caught up at start
		}
		if rn.err != nil {
			s.Error = rn.err.Error()
		}
		if rn.rebuild != nil {
			rb := *rn.rebuild
			s.Rebuild = &rb
		}
		s.Comparison = rn.comparison // never changed once set: shared
		if head.Commit > cp.Commit {
			s.LagEvents = head.Commit - cp.Commit
			if !lastAt.IsZero() {
				s.LagSeconds = time.Since(lastAt).Seconds()
			}
		}
		rn.mu.Unlock()
		out = append(out, s)
	}
	return out, nil
}

// ErrBehind: the projection did not reach the position in time, or is failing and cannot.
var ErrBehind = errors.New("read model is behind the requested position")

// WaitFor waits until projection name has applied every event up to pos, or until ctx ends
// (ErrBehind). A failed projection fails at once. While it waits, the projection applies
// events as they arrive instead of lingering.
//
// A projection being rebuilt because its live generation is of another version has reached
// no position until the rebuild is swapped in: queries must not read its tables before. Call
// WaitFor before every query of a projection, with the zero position if any will do.
func (r *Runner) WaitFor(ctx context.Context, name string, pos eventstore.Position) error {
	r.init()
	rn, ok := r.runs[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProjection, name)
	}
	rn.mu.Lock()
	reached := rn.checkpoint.Compare(pos) >= 0 && !rn.outdated
	rn.mu.Unlock()
	if reached {
		return nil // no need to hurry the projection
	}
	rn.addWaiter()
	defer rn.removeWaiter()
	for {
		rn.mu.Lock()
		reached := rn.checkpoint.Compare(pos) >= 0 && !rn.outdated
		failed, err := rn.state == StateFailed, rn.err
		advanced := rn.advanced
		rn.mu.Unlock()
		switch {
		case reached:
			return nil
		case failed:
			return fmt.Errorf("%w: projection %s is failing: %v", ErrBehind, name, err)
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s at %v", ErrBehind, name, pos)
		}
	}
}

// addWaiter counts a WaitFor that has to wait. The first one stops a linger in progress: while
// anyone waits, the projection applies what it has at once.
func (rn *run) addWaiter() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.waiters++
	if rn.waiters == 1 {
		close(rn.hurry)
		rn.hurry = make(chan struct{})
	}
}

func (rn *run) removeWaiter() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.waiters--
}
