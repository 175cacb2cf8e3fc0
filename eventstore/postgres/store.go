package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/internal/signal"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config tunes a Store. The zero Config is ready to use.
type Config struct {
	// MaxConns caps the connections of the store's pool; 0 means 16. The listener connection
	// (see the package documentation) comes on top.
	MaxConns int32
	// StatementTimeout bounds every statement, and each write's whole wait from its call to
	// its outcome: its turn behind the transaction in progress, the write lock and its own
	// transaction; 0 means 10 s.
	StatementTimeout time.Duration
	// ConnectTimeout bounds each connection attempt; 0 means 5 s.
	ConnectTimeout time.Duration
	// MaxBatch caps how many appends, deletes and truncates share one transaction; 0 means
	// 256.
	MaxBatch int
	// OnBatch, if set, hears the size of each transaction the writer committed (for metrics).
	OnBatch func(size int)
	// KeepDeleted is how long a deleted stream keeps its row, for a stream recreated meanwhile
	// to go on from its last revision, as KurrentDB's does; after that its name is forgotten
	// and a new stream under it starts at revision 0. 0 means DefaultKeepDeleted. It is far
	// longer than a request, so that no writer that read a stream before its delete can
	// meet it again, recreated, at the revision it read. A stream that expired (see
	// eventstore.StreamAppend.MaxAge) is deleted as of the time it expired.
	KeepDeleted time.Duration

	// poll replaces pollInterval, for tests that must see a subscription woken by a
	// notification and not by its poll.
	poll time.Duration
}

// DefaultKeepDeleted is how long a deleted stream keeps its row unless Config says otherwise.
const DefaultKeepDeleted = time.Hour

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = 16
	}
	if c.StatementTimeout <= 0 {
		c.StatementTimeout = 10 * time.Second
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 5 * time.Second
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.poll <= 0 {
		c.poll = pollInterval
	}
	return c
}

// Store is the event store on a PostgreSQL database. It is safe for concurrent use, and any
// number of processes may open stores on one database.
type Store struct {
	cfg      Config
	pool     *pgxpool.Pool
	id       string // the payload of its writer's notifications (see listen)
	password string // of the database URL, kept out of every error (see redact)

	requests chan *request
	closing  chan struct{}
	closed   atomic.Bool
	close    sync.Once
	written  chan struct{} // closed when the writer has stopped
	listened chan struct{} // closed when the listener has stopped
	// ctx ends when the store closes, after the writer has stopped: it ends the listener.
	ctx    context.Context
	cancel context.CancelFunc

	commits signal.Signal // woken at every wake-up of the subscriptions

	// looked is when the writer last looked for expired streams, and moreExpired whether it
	// left some (see expiryLook). Only the writer touches them.
	looked      time.Time
	moreExpired bool
}

var (
	_ eventstore.Store               = (*Store)(nil)
	_ eventstore.Feed                = (*Store)(nil)
	_ eventstore.MultiStreamAppender = (*Store)(nil)
)

// Open connects to the database at url (a postgres:// URL or a key=value connection string),
// brings its schema up to date and starts the store's writer and listener. The database must
// exist. ctx bounds the opening alone: the store works on after it ends. Errors match
// eventstore.ErrInvalidArgument for a URL that cannot be parsed, eventstore.ErrUnavailable for
// a server that cannot be reached, or ctx's error.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message quotes the URL, with its password masked only as far as it can
		// tell where the password is in a URL that does not parse.
		return nil, fmt.Errorf("open event store: %w: the database URL cannot be parsed", eventstore.ErrInvalidArgument)
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	// The store's statements are small and indexed: compiling one (JIT), which the planner
	// chooses on estimates of tables never analyzed, cost a log page 65-139 ms for 1 ms of
	// work; and a plan made generic while the events table was nearly empty scans it whole
	// (BenchmarkReadAll, BenchmarkAppend64Writers).
	pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	pcfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	s := &Store{
		cfg:      cfg,
		id:       uuid.NewString(),
		password: pcfg.ConnConfig.Password,
		requests: make(chan *request),
		closing:  make(chan struct{}),
		written:  make(chan struct{}),
		listened: make(chan struct{}),
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, s.fault(ctx, fmt.Errorf("open event store: %w", err))
	}
	if err := migrate(ctx, s.pool); err != nil {
		s.pool.Close()
		return nil, s.fault(ctx, fmt.Errorf("open event store: %w", err))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.writer()
	go s.listen(pcfg.ConnConfig.Copy())
	return s, nil
}

// Close stops the writer after its current batch, ends the subscriptions and fails pending and
// later calls with eventstore.ErrClosed, and closes the connections.
func (s *Store) Close() error {
	s.close.Do(func() {
		s.closed.Store(true)
		close(s.closing)
		<-s.written
		s.cancel()
		<-s.listened
		s.pool.Close()
	})
	return nil
}

// Ping implements eventstore.Store: SELECT 1 through the pool.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT 1`); err != nil {
		return s.fault(ctx, fmt.Errorf("ping: %w", err))
	}
	return nil
}

// CheckWritable reports whether the database takes writes now, in one round trip as Ping: not
// while the server is a standby (in recovery) or read-only by default
// (default_transaction_read_only, as a failover leaves a demoted primary). Then every write
// fails while reads and Ping succeed, and it returns an error matching
// eventstore.ErrUnavailable that says why; otherwise it fails as Ping does.
func (s *Store) CheckWritable(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("check writable: %w", err)
	}
	var recovery bool
	var readOnly string
	err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only')`).Scan(&recovery, &readOnly)
	switch {
	case err != nil:
		return s.fault(ctx, fmt.Errorf("check writable: %w", err))
	case recovery:
		return fmt.Errorf("%w: the database takes no writes: it is a standby, in recovery", eventstore.ErrUnavailable)
	case readOnly == "on":
		return fmt.Errorf("%w: the database takes no writes: transaction_read_only is on", eventstore.ErrUnavailable)
	}
	return nil
}

// Head implements eventstore.Feed: the position of the last event assigned, which a delete or
// a truncate may have removed since.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	if err := s.usable(ctx); err != nil {
		return eventstore.Position{}, fmt.Errorf("head: %w", err)
	}
	var head int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM log_head`).Scan(&head); err != nil {
		return eventstore.Position{}, s.fault(ctx, fmt.Errorf("head: %w", err))
	}
	return position(head), nil
}

// usable returns why a call cannot start, if it cannot.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

// changes returns a channel that is closed at the next wake-up of the subscriptions.
func (s *Store) changes() <-chan struct{} { return s.commits.Wait() }

// wake wakes the subscriptions: a commit here or, as the listener heard, in another process.
func (s *Store) wake() { s.commits.Notify() }

func position(p int64) eventstore.Position {
	return eventstore.Position{Commit: uint64(p), Prepare: uint64(p)}
}
