package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/postgres/pgtest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The benchmarks run against pgtest's throwaway servers: a PostgreSQL on the same machine (and
// cores) as the benchmark, over loopback. BenchmarkAppend64Writers starts one of its own with
// fsync on, as a production server runs, since a commit's disk flush is what a group commit
// shares; the others use the test binary's, with fsync off.

// benchWriters is the number of goroutines that append at once.
const benchWriters = 64

// benchOrderEvents is how many events a writer appends to one stream before it starts the
// next, as commands make an order's life.
const benchOrderEvents = 10

// benchEvent returns an event shaped like an order's: about 200 bytes of JSON data, and
// metadata as the service writes it.
func benchEvent(stream string, line int) eventstore.EventData {
	return eventstore.EventData{
		ID:   uuid.New(),
		Type: "order.line-added.v1",
		Data: fmt.Appendf(nil, `{"orderId":%q,"lineId":"line-%02d","sku":"SKU-%06d","name":"Espresso beans, whole, 1 kg",`+
			`"quantity":2,"unitPrice":{"amount":1999,"currency":"EUR"},"addedAt":"2026-12-02T01:00:00.123456789Z"}`,
			stream, line, 4711+line),
		Metadata: []byte(`{"principal":"shop-1","command":"add-line","correlationId":"01J9Z0KX3M5N7P9R1T3V5X7Z9B"}`),
	}
}

// appender is what the writers of a benchmark append to: the Store, or the yardstick.
type appender interface {
	Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error)
}

// orderWriter appends one event at a time to streams of its own, benchOrderEvents to each,
// each append with the exact revision the one before returned.
type orderWriter struct {
	writer, order, events int
	stream                string
	expected              eventstore.ExpectedRevision
}

// next returns the stream, expected revision and event of the writer's next append.
func (w *orderWriter) next() (string, eventstore.ExpectedRevision, eventstore.EventData) {
	if w.events%benchOrderEvents == 0 {
		w.order++
		w.stream, w.expected = fmt.Sprintf("order-w%02d-%06d", w.writer, w.order), eventstore.NoStream
	}
	w.events++
	return w.stream, w.expected, benchEvent(w.stream, w.events%benchOrderEvents)
}

// runWriters makes b.N appends in all from benchWriters goroutines, one event each, and resets
// the timer once they are ready to start. sent, if not nil, is called with each event's id and
// the time just before its Append call.
func runWriters(b *testing.B, s appender, sent func(uuid.UUID, time.Time)) {
	b.Helper()
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range benchWriters {
		wg.Go(func() {
			w := orderWriter{writer: i}
			<-start
			for left.Add(-1) >= 0 {
				stream, expected, e := w.next()
				now := time.Now()
				if sent != nil {
					sent(e.ID, now)
				}
				res, err := s.Append(ctx, stream, expected, e)
				if err != nil {
					b.Errorf("writer %d: append to %s at %v: %v", i, stream, expected, err)
					return
				}
				w.expected = eventstore.Exact(res.Revision)
			}
		})
	}
	b.ResetTimer()
	close(start)
	wg.Wait()
}

// openBenchStore opens a Store on a new database of server; it closes with the
// benchmark. It returns the database's URL too.
func openBenchStore(b *testing.B, server *pgtest.Server) (*Store, string) {
	b.Helper()
	url := server.NewDatabase(b)
	s, err := Open(context.Background(), url, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, url
}

func reportRate(b *testing.B, events int) float64 {
	rate := float64(events) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "events/s")
	return rate
}

// BenchmarkAppend64Writers: 64 goroutines append b.N events in all, one per append, each to
// streams of its own (ten events a stream, an order's life) with the exact revision its last
// append returned, as command handlers do. It reports events/s of two stores on the same
// server, each on a database of its own:
//
//   - store: the Store, whose writer commits the appends that wait in one transaction.
//   - oneTransactionPerAppend: the yardstick (see yardstick), one transaction per append and
//     no batching, as github.com/modernice/goes's PostgreSQL backend writes.
//
// The target is the store at 2× the yardstick's events/s or more: oneTransactionPerAppend
// reports the ratio as store-ratio, the mean events/s of the store's runs (of as many appends)
// over its own. store also reports appends/tx, the appends its transactions held on average.
//
//	go test -run '^$' -bench 'BenchmarkAppend64Writers' -benchtime 20000x -count 3 ./eventstore/postgres/
func BenchmarkAppend64Writers(b *testing.B) {
	storeRates := map[int][]float64{} // the events/s of the store's runs, by b.N
	durable := pgtest.StartOwn(b, "fsync=on")
	b.Run("store", func(b *testing.B) {
		s, url := openBenchStore(b, durable)
		runWriters(b, s, nil)
		storeRates[b.N] = append(storeRates[b.N], reportRate(b, b.N))
		b.StopTimer()
		reportTransactions(b, url)
	})
	b.Run("oneTransactionPerAppend", func(b *testing.B) {
		y := openYardstick(b, durable)
		runWriters(b, y, nil)
		rate := reportRate(b, b.N)
		if store := storeRates[b.N]; len(store) > 0 {
			b.ReportMetric(mean(store)/rate, "store-ratio")
		}
	})
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// reportTransactions reports how many appends the store's transactions held on average. A
// transaction records its events at its start (now()), and the writers take turns: each
// transaction has a recorded time of its own.
func reportTransactions(b *testing.B, url string) {
	b.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	var txs int64
	if err := pool.QueryRow(context.Background(), `SELECT count(DISTINCT recorded) FROM events`).Scan(&txs); err != nil {
		b.Fatal(err)
	}
	if txs > 0 {
		b.ReportMetric(float64(b.N)/float64(txs), "appends/tx")
	}
}

// yardstick is the baseline of BenchmarkAppend64Writers, and nothing else: a minimal event
// store that writes as github.com/modernice/goes's PostgreSQL backend does (EventStore.Insert
// of backend/postgres; the module cannot be imported here). Each append is a transaction of its
// own on a connection of a pool (BEGIN, one INSERT per event, COMMIT), positions come from a
// bigserial column, and a unique (stream, revision) constraint refuses a second event at a
// revision, as goes's unique index on aggregate versions does: no lock, no batching. Like goes
// it trusts the caller's revision to follow the stream's last (it would not refuse an expected
// revision past the end), which the benchmark's writers do. Its table has the columns of the
// store's events, in a database of its own.
type yardstick struct{ pool *pgxpool.Pool }

// yardstickConns is the yardstick's pool size: the Store's default MaxConns.
const yardstickConns = 16

const yardstickSchema = `CREATE TABLE yardstick_events (
	position  bigserial   PRIMARY KEY,
	id        uuid        NOT NULL UNIQUE,
	stream    text        NOT NULL,
	revision  bigint      NOT NULL,
	type      text        NOT NULL,
	data      bytea       NOT NULL,
	metadata  bytea,
	recorded  timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT yardstick_events_revision UNIQUE (stream, revision)
)`

// openYardstick creates the yardstick's table in a new database of the test server.
func openYardstick(b *testing.B, server *pgtest.Server) *yardstick {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(server.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = yardstickConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), yardstickSchema); err != nil {
		b.Fatal(err)
	}
	return &yardstick{pool}
}

// Append writes events after the expected revision (NoStream or Exact) in one transaction.
func (y *yardstick) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	first, exact := expected.Revision()
	switch {
	case exact:
		first++
	case !expected.IsNoStream():
		return eventstore.AppendResult{}, fmt.Errorf("%w: the yardstick takes NoStream or Exact", eventstore.ErrInvalidArgument)
	}
	tx, err := y.pool.Begin(ctx)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var pos int64
	for i, e := range events {
		err := tx.QueryRow(ctx, `INSERT INTO yardstick_events (id, stream, revision, type, data, metadata)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING position`,
			e.ID, stream, int64(first)+int64(i), e.Type, e.Data, e.Metadata).Scan(&pos)
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.ConstraintName == "yardstick_events_revision" {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected}
		}
		if err != nil {
			return eventstore.AppendResult{}, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	return eventstore.AppendResult{Revision: first + uint64(len(events)) - 1, Position: position(pos), Fate: eventstore.FateWritten}, nil
}

// BenchmarkReadAll reads a 100,000-event log from the start with ReadAll; the log was appended
// beforehand (not timed) by appends of 100 events to 100 streams. It reports events/s; the
// target is 200,000 or more.
//
//	go test -run '^$' -bench 'BenchmarkReadAll' -count 3 ./eventstore/postgres/
func BenchmarkReadAll(b *testing.B) {
	const total = 100_000
	s, _ := openBenchStore(b, pgtest.Start(b))
	fillLog(b, s, total)
	ctx := context.Background()
	read := 0
	for b.Loop() {
		n := 0
		for _, err := range s.ReadAll(ctx, eventstore.ReadAllOptions{}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != total {
			b.Fatalf("read %d events, want %d", n, total)
		}
		read += n
	}
	reportRate(b, read)
}

// fillLog appends total events to 100 streams, in appends of 100 events, the streams' appends
// made at once so that the store commits many in a transaction.
func fillLog(b *testing.B, s *Store, total int) {
	b.Helper()
	const streams, per = 100, 100
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			stream := fmt.Sprintf("order-%03d", i)
			expected := eventstore.NoStream
			for range total / streams / per {
				events := make([]eventstore.EventData, per)
				for j := range events {
					events[j] = benchEvent(stream, j)
				}
				res, err := s.Append(context.Background(), stream, expected, events...)
				if err != nil {
					b.Errorf("fill %s: %v", stream, err)
					return
				}
				expected = eventstore.Exact(res.Revision)
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
}

// BenchmarkSubscriberLag: one SubscribeAll subscription on the Store while 64 writers append
// b.N events to it as BenchmarkAppend64Writers's do. An event's lag is the time from just
// before its Append call started to the subscription's yielding it. It reports the lags'
// median and 99th percentile (lag-p50-ms, lag-p99-ms; the target is a p99 of 50 ms or less),
// their maximum (lag-max-ms), and events/s from the writers' start until the subscription has
// yielded the last event.
//
//	go test -run '^$' -bench 'BenchmarkSubscriberLag' -benchtime 20000x -count 3 ./eventstore/postgres/
func BenchmarkSubscriberLag(b *testing.B) {
	s, _ := openBenchStore(b, pgtest.Start(b))
	sent := &sendTimes{at: make(map[uuid.UUID]time.Time, b.N)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lags := subscribeLags(ctx, b, s, sent)
	runWriters(b, s, sent.record)
	if b.Failed() {
		cancel() // the subscription would wait for events that never come
	}
	var got []time.Duration
	select {
	case got = <-lags:
	case <-time.After(patience):
		b.Fatalf("the subscription did not yield the %d events within %v of the last append", b.N, patience)
	}
	reportRate(b, b.N)
	b.StopTimer()
	reportLags(b, got)
}

// sendTimes holds the time each event's Append call started, by event id.
type sendTimes struct {
	mu sync.Mutex
	at map[uuid.UUID]time.Time
}

func (t *sendTimes) record(id uuid.UUID, at time.Time) {
	t.mu.Lock()
	t.at[id] = at
	t.mu.Unlock()
}

func (t *sendTimes) get(id uuid.UUID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[id]
	return at, ok
}

// subscribeLags subscribes to s's log and, once the subscription has caught up, returns a
// channel that receives the lags of the first b.N events of sent when it has yielded them all,
// or what it has when it fails. To know it has caught up, it appends an event of its own first
// and waits for the subscription to yield it.
func subscribeLags(ctx context.Context, b *testing.B, s *Store, sent *sendTimes) <-chan []time.Duration {
	b.Helper()
	ready, out := make(chan struct{}), make(chan []time.Duration, 1)
	go func() {
		lags := make([]time.Duration, 0, b.N)
		defer func() { out <- lags }()
		for e, err := range s.SubscribeAll(ctx, eventstore.SubscribeOptions{}) {
			now := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					b.Errorf("subscription: %v", err)
				}
				return
			}
			if e.Stream == "ready" {
				close(ready)
				continue
			}
			at, ok := sent.get(e.ID)
			if !ok {
				b.Errorf("the subscription yielded event %s of %s, which no writer sent", e.ID, e.Stream)
				return
			}
			if lags = append(lags, now.Sub(at)); len(lags) == b.N {
				return
			}
		}
	}()
	if _, err := s.Append(ctx, "ready", eventstore.NoStream, benchEvent("ready", 0)); err != nil {
		b.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(patience):
		b.Fatalf("the subscription did not yield the first event within %v", patience)
	}
	return out
}

// reportLags reports the median, the 99th percentile and the maximum of lags, in ms.
func reportLags(b *testing.B, lags []time.Duration) {
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	// The nearest rank: the smallest lag that q of the lags do not exceed.
	quantile := func(q float64) time.Duration {
		return lags[max(0, int(math.Ceil(q*float64(len(lags))))-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(quantile(0.50)), "lag-p50-ms")
	b.ReportMetric(ms(quantile(0.99)), "lag-p99-ms")
	b.ReportMetric(ms(lags[len(lags)-1]), "lag-max-ms")
}
