package projections_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/command/commandtest"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

// benchOrders is the number of orders of the rebuild benchmark's log, 10 events each.
const benchOrders = 100_000

// benchLog returns a store holding benchOrders order histories.
func benchLog(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(commandtest.Log(b, benchOrders), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkRebuildOrders builds the orders read model from position 0 of a 1,000,000-event log.
func BenchmarkRebuildOrders(b *testing.B) { benchRebuild(b, projections.Orders{}) }

// BenchmarkRebuildSales builds the sales read model from position 0 of the same log: what a
// service that gains the projection catches up with when it starts.
func BenchmarkRebuildSales(b *testing.B) { benchRebuild(b, projections.Sales{}) }

func benchRebuild(b *testing.B, p projections.Projection) {
	s := benchLog(b)
	head, err := s.Head(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for b.Loop() {
		db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "readmodels.db"))
		if err != nil {
			b.Fatal(err)
		}
		r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{p}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		if err := r.WaitFor(ctx, p.Name(), head); err != nil {
			b.Fatal(err)
		}
		cancel()
		<-done
		db.Close()
		total += benchOrders * 10
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkExportAsOf exports the orders read model of the 1,000,000-event log as of the time
// its last event was recorded, into a new file: every event is read and applied.
func BenchmarkExportAsOf(b *testing.B) {
	s := benchLog(b)
	ctx := context.Background()
	var last eventstore.RecordedEvent
	for e, err := range s.ReadAll(ctx, eventstore.ReadAllOptions{}) {
		if err != nil {
			b.Fatal(err)
		}
		last = e
	}
	total := uint64(0)
	for b.Loop() {
		db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "export.db"))
		if err != nil {
			b.Fatal(err)
		}
		res, err := projections.Export(ctx, s, projections.Orders{}, db, projections.AsOf{Time: last.Recorded})
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
		total += res.Events
	}
	if total != uint64(b.N)*benchOrders*10 {
		b.Fatalf("exported %d events in %d runs; want %d each", total, b.N, benchOrders*10)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
}

// createsLogOrders is the number of keyed creates in the live benchmark's log.
const createsLogOrders = 10_000

// createsLog returns a store holding createsLogOrders keyed creates as the service writes
// them: a key claim, a client-reference claim with order.created.v2 and order.line-added.v2 in
// one append, then the key's outcome. Five events each.
func createsLog(b *testing.B) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(b.TempDir(), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < createsLogOrders; i += 16 {
				if err := appendCreate(ctx, s, i, at); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return s
}

func appendCreate(ctx context.Context, s *sqlite.Store, i int, at time.Time) error {
	key, id, principal := fmt.Sprint("key-", i), fmt.Sprintf("order%07d", i), "bench"
	keyStream := idempotency.StreamName(principal, key)
	claim := idempotency.Claimed{Principal: principal, Key: key, Method: "POST", Path: "/v1/orders", Fingerprint: "f" + key,
		OrderID: id, Claimant: "c", ClaimedAt: at, LeaseUntil: at.Add(time.Minute), ExpiresAt: at.Add(24 * time.Hour)}
	if _, err := s.Append(ctx, keyStream, eventstore.NoStream, benchEvent(idempotency.TypeClaimed, claim, nil)); err != nil {
		return err
	}
	customer := "cust-" + key
	md, _ := json.Marshal(command.Metadata{Principal: principal, IdempotencyKey: key, Command: "create-order", At: at})
	var orderEvents []eventstore.EventData
	for _, e := range []order.Event{
		order.Created{OrderID: id, CustomerID: customer, Currency: "EUR", ClientRef: key, Channel: "web", At: at},
		order.LineAdded{SKU: "sku-1", Name: "Product 1", Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}, At: at},
	} {
		typ, data, err := order.Marshal(e)
		if err != nil {
			return err
		}
		orderEvents = append(orderEvents, eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: md})
	}
	ref := benchEvent(command.TypeClientRefClaimed, command.ClientRefClaimed{Principal: principal, CustomerID: customer, ClientReference: key, OrderID: id}, nil)
	_, err := s.MultiStreamAppend(ctx,
		eventstore.StreamAppend{Stream: command.ClientRefStream(principal, customer, key), Expected: eventstore.NoStream, Events: []eventstore.EventData{ref}},
		eventstore.StreamAppend{Stream: command.StreamName(id), Expected: eventstore.NoStream, Events: orderEvents})
	if err != nil {
		return err
	}
	body := `{"id":"` + id + `","customerId":"` + customer + `","status":"pending","currency":"EUR","total":100,"lines":[{"sku":"sku-1","quantity":1,"unitPrice":100}]}`
	done := idempotency.Completed{Outcome: idempotency.Outcome{Status: 201, Headers: map[string]string{"Location": "/v1/orders/" + id}, Body: body},
		OrderID: id, CompletedAt: at}
	_, err = s.Append(ctx, keyStream, eventstore.Exact(0), benchEvent(idempotency.TypeCompleted, done, nil))
	return err
}

func benchEvent(typ string, v any, md []byte) eventstore.EventData {
	data, _ := json.Marshal(v)
	return eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: md}
}

// BenchmarkLiveCreates applies a log of keyed creates to the three read models of the service,
// as the live loop does under load: batches of up to 1,000 events, the three projections side
// by side on one read-model database.
func BenchmarkLiveCreates(b *testing.B) {
	s := createsLog(b)
	ctx := context.Background()
	head, err := s.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ps := []projections.Projection{projections.Orders{}, projections.Lookups{}, projections.Sales{}}
	events := 0
	cpu0 := processCPU(b)
	for b.Loop() {
		db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "readmodels.db"))
		if err != nil {
			b.Fatal(err)
		}
		// Catching up, a projection applies up to ten BatchSizes at once.
		r := &projections.Runner{DB: db, Feed: s, Projections: ps, BatchSize: 100}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(runCtx) }()
		for _, p := range ps {
			if err := r.WaitFor(runCtx, p.Name(), head); err != nil {
				b.Fatal(err)
			}
		}
		cancel()
		<-done
		db.Close()
		events += createsLogOrders * 5
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(events), "cpu-ns/event")
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkApplyCreates applies keyed creates to the orders and lookups read models as a live
// batch does, without the log: batches of 200 creates (1,000 events), each projection's in its
// own transaction, on one connection. An op is one batch.
func BenchmarkApplyCreates(b *testing.B) {
	const batchCreates, logCreates = 200, 10_000
	ctx := context.Background()
	events := createEvents(b, logCreates)
	ps := []projections.Projection{projections.Orders{}, projections.Lookups{}}
	var conn *sql.Conn
	var tables []projections.Tables
	var fresh []eventstore.RecordedEvent // each projection's events of a batch, as its runner hands them
	next := logCreates                   // creates of events applied to the current database
	var setup time.Duration              // CPU time spent opening databases
	cpu0 := processCPU(b)
	for b.Loop() {
		if next == logCreates {
			b.StopTimer()
			c := processCPU(b)
			conn, tables = applyDB(b, ps)
			setup += processCPU(b) - c
			next = 0
			b.StartTimer()
		}
		batch := events[next*5 : (next+batchCreates)*5]
		for i, p := range ps {
			fresh = runnerEvents(p, batch, fresh[:0])
			if err := applyBatch(ctx, conn, p, tables[i], fresh); err != nil {
				b.Fatal(err)
			}
		}
		next += batchCreates
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchCreates), "ns/create")
	b.ReportMetric(float64((processCPU(b)-cpu0-setup).Nanoseconds())/float64(b.N*batchCreates), "cpu-ns/create")
}

// createEvents returns the events of n keyed creates as createsLog stores them, positioned.
func createEvents(b *testing.B, n int) []eventstore.RecordedEvent {
	s := createsLog(b)
	var out []eventstore.RecordedEvent
	for e, err := range s.ReadAll(context.Background(), eventstore.ReadAllOptions{}) {
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, e)
	}
	if len(out) != 5*n {
		b.Fatalf("%d events for %d creates", len(out), n)
	}
	return out
}

// applyDB opens a new read-model database with the projections' tables and returns the
// connection to apply on.
func applyDB(b *testing.B, ps []projections.Projection) (*sql.Conn, []projections.Tables) {
	db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "readmodels.db"))
	if err != nil {
		b.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); db.Close() })
	var tables []projections.Tables
	for _, p := range ps {
		t := projections.Tables{}
		for _, name := range p.Tables() {
			t[name] = name
		}
		tx, err := conn.BeginTx(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Create(context.Background(), tx, t); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		tables = append(tables, t)
	}
	return conn, tables
}

// runnerEvents appends to out the events of batch that p's runner hands it.
func runnerEvents(p projections.Projection, batch, out []eventstore.RecordedEvent) []eventstore.RecordedEvent {
	filter := p.Filter()
	s, selective := p.(projections.Selective)
	for _, e := range batch {
		if filter.Match(e.Stream) && (!selective || s.Applies(e.Type)) {
			out = append(out, e)
		}
	}
	return out
}

// applyBatch applies events to p in one transaction.
func applyBatch(ctx context.Context, conn *sql.Conn, p projections.Projection, t projections.Tables, events []eventstore.RecordedEvent) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := p.Apply(ctx, tx, t, events); err != nil {
		return err
	}
	return tx.Commit()
}
