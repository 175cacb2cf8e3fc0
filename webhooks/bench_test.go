package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/webhooks"
	"github.com/google/uuid"
)

// BenchmarkDeliveries measures deliveries per second from the embedded store to a loopback
// receiver that answers at once: b.N order events of one client, appended before the
// endpoint's runner starts (so it reads a backlog), each delivered signed, with its
// checkpoints appended as in production.
func BenchmarkDeliveries(b *testing.B) {
	store, err := sqlite.Open(b.TempDir(), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var got atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer recv.Close()
	ctx := context.Background()
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivate, cfg.SingleNode = true, true
	sealer, _ := webhooks.NewSealer(make([]byte, 32))
	svc := &webhooks.Service{Store: store, Feed: store, Config: &cfg, Node: "bench", Log: slog.New(slog.DiscardHandler),
		Endpoints: &webhooks.Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	if _, _, _, err := svc.Endpoints.Register(ctx, "shop", "bench", recv.URL, []string{"*"}, ""); err != nil {
		b.Fatal(err)
	}
	appendOrders(b, store, b.N)

	b.ResetTimer()
	start := time.Now()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.Run(runCtx); close(done) }()
	for got.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}

// appendOrders appends n events of shop's orders: orders of 5 events each (created, 4 lines).
func appendOrders(b *testing.B, store eventstore.Store, n int) {
	md, _ := json.Marshal(command.Metadata{Principal: "shop", Command: "bench", At: time.Now()})
	for i := 0; i < n; i += 5 {
		id := fmt.Sprintf("order-%07d", i)
		evs := []order.Event{order.Created{OrderID: id, CustomerID: "c", Currency: "EUR", At: time.Now()}}
		for j := 1; j < 5; j++ {
			evs = append(evs, order.LineAdded{SKU: fmt.Sprint("sku-", j), Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}, At: time.Now()})
		}
		var data []eventstore.EventData
		for _, e := range evs[:min(5, n-i)] {
			typ, raw, err := order.Marshal(e)
			if err != nil {
				b.Fatal(err)
			}
			data = append(data, eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: typ, Data: raw, Metadata: md})
		}
		if _, err := store.Append(context.Background(), command.StreamName(id), eventstore.NoStream, data...); err != nil {
			b.Fatal(err)
		}
	}
}
