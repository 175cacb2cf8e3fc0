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

// BenchmarkDeliveriesToManyEndpoints measures 100 endpoints of one client following the log
// while b.N order events are appended, each delivered to every endpoint: deliveries per second,
// and the log events the runners read themselves per event appended. With tail-buffer=1000
// (the default) the node's one reader hands the events to the runners; with tail-buffer=0
// every runner reads the log on its own.
func BenchmarkDeliveriesToManyEndpoints(b *testing.B) {
	for _, buf := range []int{0, 1000} {
		b.Run(fmt.Sprintf("tail-buffer=%d", buf), func(b *testing.B) { benchManyEndpoints(b, 100, buf) })
	}
}

func benchManyEndpoints(b *testing.B, endpoints, tailBuffer int) {
	store, recv, got := benchTargets(b)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivate, cfg.SingleNode, cfg.TailBuffer = true, true, tailBuffer
	sealer, _ := webhooks.NewSealer(make([]byte, 32))
	feed := &webhooks.CountingFeed{Feed: store}
	svc := &webhooks.Service{Store: store, Feed: feed, Config: &cfg, Node: "bench", Log: slog.New(slog.DiscardHandler),
		Endpoints: &webhooks.Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	for i := range endpoints {
		if _, err := webhooks.Register(ctx, svc.Endpoints, "shop", fmt.Sprint("bench-", i), fmt.Sprintf("%s/%d", recv.URL, i), []string{"*"}, ""); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	appendOrders(b, store, 0, 5) // every runner has started and read the log once
	waitFor(got, int64(5*endpoints))

	b.ResetTimer()
	read, start := feed.Read.Load(), time.Now()
	appendOrders(b, store, 5, b.N)
	waitFor(got, int64((5+b.N)*endpoints))
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*endpoints)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(feed.Read.Load()-read)/float64(b.N), "log-reads/event")
}

// benchTargets opens an embedded store and starts a loopback receiver that answers at once,
// counting what it receives; both end with b.
func benchTargets(b *testing.B) (*sqlite.Store, *httptest.Server, *atomic.Int64) {
	store, err := sqlite.Open(b.TempDir(), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	got := new(atomic.Int64)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	b.Cleanup(recv.Close)
	return store, recv, got
}

func waitFor(n *atomic.Int64, want int64) {
	for n.Load() < want {
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkDeliveries measures deliveries per second from the embedded store to a loopback
// receiver that answers at once: b.N order events of one client, appended before the
// endpoint's runner starts (so it reads a backlog), each delivered signed, with its
// checkpoints appended as in production.
func BenchmarkDeliveries(b *testing.B) {
	store, recv, got := benchTargets(b)
	ctx := context.Background()
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivate, cfg.SingleNode = true, true
	sealer, _ := webhooks.NewSealer(make([]byte, 32))
	svc := &webhooks.Service{Store: store, Feed: store, Config: &cfg, Node: "bench", Log: slog.New(slog.DiscardHandler),
		Endpoints: &webhooks.Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	if _, err := webhooks.Register(ctx, svc.Endpoints, "shop", "bench", recv.URL, []string{"*"}, ""); err != nil {
		b.Fatal(err)
	}
	appendOrders(b, store, 0, b.N)

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

// appendOrders appends n events of shop's orders, numbered from from: orders of 5 events each
// (created, 4 lines), one append each.
func appendOrders(b *testing.B, store eventstore.Store, from, n int) {
	md, _ := json.Marshal(command.Metadata{Principal: "shop", Command: "bench", At: time.Now()})
	for i := from; i < from+n; i += 5 {
		id := fmt.Sprintf("order-%07d", i)
		evs := []order.Event{order.Created{OrderID: id, CustomerID: "c", Currency: "EUR", At: time.Now()}}
		for j := 1; j < 5; j++ {
			evs = append(evs, order.LineAdded{SKU: fmt.Sprint("sku-", j), Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}, At: time.Now()})
		}
		var data []eventstore.EventData
		for _, e := range evs[:min(5, from+n-i)] {
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
