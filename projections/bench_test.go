package projections_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

// benchOrders is the number of orders of the rebuild benchmark's log, 10 events each.
const benchOrders = 100_000

// benchLog returns a store holding benchOrders order histories, generated on the first run
// and kept in the temporary directory for the next ones.
func benchLog(b *testing.B) *sqlite.Store {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("orders-bench-log-%d-v1", benchOrders))
	done := filepath.Join(dir, "complete")
	if _, err := os.Stat(done); err != nil {
		os.RemoveAll(dir)
		generateLog(b, dir)
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func generateLog(b *testing.B, dir string) {
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < benchOrders; i += 16 {
				id := fmt.Sprintf("bench%07d", i)
				history := []order.Event{order.Created{OrderID: id, CustomerID: fmt.Sprint("c", i%1000), Currency: "EUR", At: at}}
				for l := range 5 {
					history = append(history, order.LineAdded{SKU: fmt.Sprint("sku-", l), Quantity: 1, UnitPrice: eur(100), At: at})
				}
				history = append(history,
					order.PaymentStarted{PaymentID: "p" + id, Amount: eur(500), At: at},
					order.PaymentConfirmed{PaymentID: "p" + id, Amount: eur(500), At: at},
					order.Shipped{Carrier: "ups", TrackingNumber: "t" + id, At: at},
					order.RefundRequested{RefundID: "r" + id, Amount: eur(100), At: at})
				events := make([]eventstore.EventData, len(history))
				for j, e := range history {
					typ, data, err := order.Marshal(e)
					if err != nil {
						b.Error(err)
						return
					}
					events[j] = eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: []byte(`{"principal":"bench","command":"bench"}`)}
				}
				if _, err := s.Append(context.Background(), "order-"+id, eventstore.NoStream, events...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkRebuildOrders builds the orders read model from position 0 of a 1,000,000-event log.
func BenchmarkRebuildOrders(b *testing.B) {
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
		r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{projections.Orders{}}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.Run(ctx) }()
		if err := r.WaitFor(ctx, "orders", head); err != nil {
			b.Fatal(err)
		}
		cancel()
		<-done
		db.Close()
		total += benchOrders * 10
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
}
