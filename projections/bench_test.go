package projections_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/acme/orders/command/commandtest"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
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
