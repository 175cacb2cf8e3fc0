package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/internal/signal"
)

// FileName is the database file's name inside the data directory.
const FileName = "orders.db"

// readers is how many reader connections of streams a store keeps open, and logReaders how
// many of the log; more concurrent reads wait for one. SQLite reads are CPU-bound, so more
// connections would only share the same processors. The log is read by the projections'
// subscriptions while they are behind, by rebuilds and by audits: a few at a time.
const (
	readers    = 16
	logReaders = 4
)

//go:embed migrations/*.sql
var migrations embed.FS

// Config tunes a Store. The zero Config is ready to use.
type Config struct {
	// MaxBatch caps how many appends share one transaction; 0 means 256.
	MaxBatch int
	// OnBatch, if set, is called by the writer after each commit with the number of appends
	// and deletes it held. It must not block.
	OnBatch func(size int)
	// CheckpointFrames is how many frames (pages) of WAL not yet copied into the database
	// file start the next copy (see Store.checkpointer); 0 means 20,000, about 80 MB.
	CheckpointFrames int
	// OnWAL, if set, is called by the checkpointer about once a second while this process
	// writes, with the frames in the WAL and how many of them are not yet copied into the
	// database file. It must not block.
	OnWAL func(frames, notCopied int)
	// Writeback is how often the kernel is asked to start writing what the checkpoints copied
	// into the database file, so that their syncs do not hold the commits (see writeback);
	// 0 means DefaultWriteback, a negative value never.
	Writeback time.Duration
	// KeepDeleted is how long a deleted stream keeps its row, for a stream recreated meanwhile
	// to go on from its last revision, as KurrentDB's does; after that its name is forgotten
	// and a new stream under it starts at revision 0. 0 means DefaultKeepDeleted. It is far
	// longer than a request, so that no writer that read a stream before its delete can
	// meet it again, recreated, at the revision it read. A stream that expired (see
	// eventstore.StreamAppend.MaxAge) is deleted as of the time it expired.
	KeepDeleted time.Duration

	hooks *testHooks
}

// DefaultKeepDeleted is how long a deleted stream keeps its row unless Config says otherwise.
const DefaultKeepDeleted = time.Hour

// Store is the embedded event store. It is safe for concurrent use.
type Store struct {
	cfg Config
	wdb *sql.DB // one connection, owned by the writer goroutine
	// rdb reads streams and logs reads the log: a long read of the log maps the file into
	// memory, which doubled such scans here, but a stream's few events cost half as much
	// without, as the file grows (under the load: stream reads 6.4–6.9% → 3.5–3.6% of CPU,
	// docs/benchmarks.md). A mapping is per connection: once the file has grown, each one
	// maps it again and takes a page fault on each page it touches anew.
	rdb, logs *sql.DB
	// streams is the writer's cache of stream rows (see writeTx).
	streams map[string]streamRow
	// undo is the writer's map of the stream rows a transaction changed (see writeTx).
	undo map[string]cachedRow
	// gathered is the writer's set of the streams of the batch it gathers (see gather).
	gathered map[string]struct{}
	// calm counts down the batches since one appended twice to one stream; the writer yields
	// for more requests only when it is 0 (see gather).
	calm int
	// kept is the writer's array for the events of a transaction, for the tail (see writeTx).
	kept []eventstore.RecordedEvent
	// looked is when the writer last looked for expired streams, and moreExpired whether it
	// left some (see Store.commit).
	looked      time.Time
	moreExpired bool

	requests chan *request
	closing  chan struct{}
	closed   atomic.Bool
	written  chan struct{} // closed when the writer has stopped
	close    sync.Once

	// ckpt is the checkpointer's connection; finish is how it asks the writer to copy the
	// rest of the WAL; wrote says that this process has written.
	ckpt         *sql.DB
	finish       chan chan struct{}
	wrote        atomic.Bool
	checkpointed chan struct{} // closed when the checkpointer has stopped
	writeback    *writeback    // of the database file; nil until the store is open
	// file is the database file, held open for the checkpointer's syncs; nil until the store
	// is open. Closed after the connections, like the writeback's (see writeback).
	file *os.File

	head   atomic.Uint64          // position of the last committed event
	flight atomic.Pointer[flight] // the transaction being committed, for its rivals
	tail   tail                   // the latest events, for subscriptions

	commits signal.Signal
}

var (
	_ eventstore.Store               = (*Store)(nil)
	_ eventstore.Feed                = (*Store)(nil)
	_ eventstore.MultiStreamAppender = (*Store)(nil)
)

// Open opens (creating if needed) the store in directory dir and brings its schema up to date.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	if cfg.CheckpointFrames <= 0 {
		cfg.CheckpointFrames = 20_000
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open event store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	wdb, err := openWriterDB(path)
	if err != nil {
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	base, err := connector(dsn(path, "FULL", readCacheKiB) + storeOptions)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	// Readers keep their connections, and with them their prepared statements, for the store's
	// life: opening one and preparing its statements costs more than a read.
	pool := func(c readConnector, n int) *sql.DB {
		db := sql.OpenDB(c)
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		return db
	}
	// The checkpointer's connection must not be synchronous=OFF, with which a copy would not
	// sync the database file before the WAL may start over and its frames be written again.
	ckpt := sql.OpenDB(base)
	ckpt.SetMaxOpenConns(1)

	s := &Store{
		cfg:          cfg,
		wdb:          wdb,
		rdb:          pool(readConnector{Connector: base}, readers),
		logs:         pool(readConnector{Connector: base, mmap: true}, logReaders),
		ckpt:         ckpt,
		requests:     make(chan *request),
		finish:       make(chan chan struct{}),
		checkpointed: make(chan struct{}),
		closing:      make(chan struct{}),
		written:      make(chan struct{}),
		streams:      map[string]streamRow{},
		undo:         map[string]cachedRow{},
	}
	if err := s.start(path); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("open event store %s: %w", path, err)
	}
	return s, nil
}

// openWriterDB opens the writer's database, of one connection, and migrates its schema.
func openWriterDB(path string) (*sql.DB, error) {
	wdb, err := sql.Open(driverName, dsn(path, "FULL", commitCacheKiB)+storeOptions)
	if err != nil {
		return nil, err
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := migrate(wdb); err != nil {
		wdb.Close()
		return nil, err
	}
	return wdb, nil
}

// start reads the head of the log and starts the writer, the checkpointer and the writeback of
// the database file at path. If it fails, the caller closes the databases.
func (s *Store) start(path string) error {
	var head sql.NullInt64
	err := s.wdb.QueryRow(`SELECT seq FROM sqlite_sequence WHERE name = 'events'`).Scan(&head)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read head: %w", err)
	}
	s.head.Store(uint64(head.Int64))
	s.tail.from = uint64(head.Int64)
	if s.file, err = os.Open(path); err != nil {
		return err
	}
	conn, err := s.wdb.Conn(context.Background())
	if err != nil {
		return err
	}
	ready := make(chan error, 1)
	go s.writer(conn, ready)
	if err := <-ready; err != nil {
		return err
	}
	go s.checkpointer()
	// Not the WAL, which every commit syncs anyway.
	s.writeback = startWriteback(s.cfg.Writeback, path)
	return nil
}

// The checkpointer looks at the WAL every checkpointTick, and copies it once it holds
// Config.CheckpointFrames frames not yet copied, or checkpointAfter after the last copy if it
// holds any. Under the load that is every 2–3 s and up to 27,000 frames; SQLite's own
// checkpoints ran every 10,000. A page written again between two copies is copied once.
const (
	checkpointAfter = 5 * time.Second
	checkpointTick  = time.Second
)

// checkpointer copies the WAL into the database file beside the writer, so that no append
// waits for a checkpoint. SQLite's own checkpoint runs in the commit that crosses 10,000 frames
// of WAL: under the load it held that commit, and every append waiting for the next one, for
// 40–70 ms about once a second (docs/benchmarks.md). A checkpoint on another connection copies
// without the write lock, but it never catches up with a writer that keeps appending, and the
// WAL starts over only once all of it is copied. So the checkpointer copies twice, the second
// time what was committed during the first, and then the writer copies, between two
// transactions, what was committed during the second; its next transaction starts the WAL
// over (see walRestart for the readers that keep it from doing so).
//
// The first copy follows this process's first write at once, and with it what an earlier
// process left in the WAL: a server killed again and again within seconds would otherwise
// never copy it, and each start would read all of it again. A process that only reads (the
// audit commands) never copies.
//
// A checkpoint that fails leaves the WAL longer and the next tries again: the disk that fails
// it fails the commits too, and they report it.
func (s *Store) checkpointer() {
	defer close(s.checkpointed)
	tick := time.NewTicker(checkpointTick)
	defer tick.Stop()
	var last time.Time // when the last copy started
	for {
		// Taken before the look, so that a first commit after it still wakes the loop.
		var written <-chan struct{} // closed by the next commit, until the first copy
		if last.IsZero() {
			written = s.changes()
		}
		if s.wrote.Load() {
			var busy, frames, copied int
			err := s.ckpt.QueryRow(`PRAGMA wal_checkpoint(NOOP)`).Scan(&busy, &frames, &copied)
			behind := frames - copied
			if err == nil && busy == 0 && s.cfg.OnWAL != nil {
				s.cfg.OnWAL(frames, behind)
			}
			if err == nil && busy == 0 && (behind >= s.cfg.CheckpointFrames || behind > 0 && (last.IsZero() || time.Since(last) >= checkpointAfter)) {
				last = time.Now()
				if !s.copyWAL() {
					return
				}
			}
		}
		select {
		case <-tick.C:
		case <-written:
		case <-s.closing:
			return
		}
	}
}

// copyWAL copies the WAL into the database file, twice beside the writer and then by the
// writer between two transactions (see checkpointer). It returns false if the store closed.
// (A copy under way when the store closes runs to its end; the last connection to close
// copies the rest.)
func (s *Store) copyWAL() bool {
	for range 2 {
		s.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
	}
	// SQLite syncs the database file only in a copy that reaches the end of the WAL: the
	// writer's, which would then wait, and hold the commits behind it, for every page the
	// passes wrote (38–101 ms under the load). Synced here, beside the writer, they are on
	// the disk by then, and the writer's part took 5–36 ms (docs/benchmarks.md). A failure
	// is left to the writer's copy, which syncs again.
	s.file.Sync()
	done := make(chan struct{})
	select {
	case s.finish <- done:
		<-done
		return true
	case <-s.closing:
		return false
	}
}

// migrate applies the embedded migrations that PRAGMA user_version says are missing.
func migrate(db *sql.DB) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for i := version; i < len(names); i++ {
		script, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(string(script)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", names[i], err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", names[i], err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate %s: %w", names[i], err)
		}
	}
	return nil
}

// Close stops the writer after its current batch, fails pending and later calls with
// eventstore.ErrClosed, and closes the database.
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		s.closed.Store(true)
		close(s.closing)
		<-s.written
		<-s.checkpointed
		err = s.closeDBs()
	})
	return err
}

func (s *Store) closeDBs() error {
	err := errors.Join(s.rdb.Close(), s.logs.Close(), s.ckpt.Close(), s.wdb.Close())
	if s.writeback != nil {
		s.writeback.Close() // after the connections: see writeback
	}
	if s.file != nil {
		err = errors.Join(err, s.file.Close())
	}
	return err
}

// Head returns the position of the last committed event (which a delete may have removed).
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := s.usable(ctx); err != nil {
		return eventstore.Position{}, fmt.Errorf("head: %w", err)
	}
	return position(s.head.Load()), nil
}

// usable returns why a call cannot start, if it cannot.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

// changes returns a channel that is closed at the next commit.
func (s *Store) changes() <-chan struct{} { return s.commits.Wait() }

func (s *Store) notify(head uint64) {
	s.head.Store(head)
	s.commits.Notify()
}

func position(p uint64) eventstore.Position {
	return eventstore.Position{Commit: p, Prepare: p}
}
