// Package commandtest makes order event logs for tests and benchmarks, written as the command
// handler writes them.
package commandtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// Log returns the data directory of an embedded store holding orders order histories of 10
// events each, chained as the command handler chains them. Every other order is written as a
// release before upcasting wrote it (order.created.v1, order.line-added.v1), so that readers
// of the log upcast half of its opening events, as they do for a log that spans releases. It is
// generated on the first call and kept in the temporary directory for the next ones
// (benchmarks run it again and again).
func Log(b testing.TB, orders int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("orders-bench-chained-%d-mixed-v2", orders))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < orders; i += 16 {
				id := fmt.Sprintf("bench%07d", i)
				history := []order.Event{order.Created{OrderID: id, CustomerID: fmt.Sprint("c", i%1000), Currency: "EUR", Channel: "web", At: at}}
				for l := range 5 {
					history = append(history, order.LineAdded{SKU: fmt.Sprint("sku-", l), Name: fmt.Sprint("Product ", l), Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}, At: at})
				}
				pay := order.Money{Amount: 500, Currency: "EUR"}
				history = append(history, order.PaymentStarted{PaymentID: "p" + id, Amount: pay, At: at},
					order.PaymentConfirmed{PaymentID: "p" + id, Amount: pay, At: at},
					order.Shipped{Carrier: "ups", TrackingNumber: "t" + id, At: at},
					order.RefundRequested{RefundID: "r" + id, Amount: order.Money{Amount: 100, Currency: "EUR"}, At: at})
				stream := command.StreamName(id)
				prev := command.Genesis
				events := make([]eventstore.EventData, len(history))
				for j, e := range history {
					typ, data, _ := order.Marshal(e)
					if i%2 == 0 {
						typ, data = earlier(e, typ, data)
					}
					m, _ := json.Marshal(command.Metadata{Principal: "bench", Command: "bench", At: at, PrevHash: prev})
					prev = command.ChainHash(prev, stream, uint64(j), typ, data, m)
					md := append([]byte(`{"hash":"`+prev+`",`), m[1:]...)
					events[j] = eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: md}
				}
				if _, err := s.Append(context.Background(), stream, eventstore.NoStream, events...); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// earlier encodes e as the release before order.created.v2 and order.line-added.v2 wrote it,
// if its type had another version then; typ and data otherwise.
func earlier(e order.Event, typ string, data []byte) (string, []byte) {
	switch e := e.(type) {
	case order.Created:
		data, _ = json.Marshal(struct {
			OrderID    string         `json:"orderId"`
			CustomerID string         `json:"customerId"`
			Currency   order.Currency `json:"currency"`
			ClientRef  string         `json:"clientRef"`
			At         time.Time      `json:"at"`
		}{e.OrderID, e.CustomerID, e.Currency, e.ClientRef, e.At})
		return "order.created.v1", data
	case order.LineAdded:
		data, _ = json.Marshal(struct {
			SKU       string      `json:"sku"`
			Quantity  int64       `json:"quantity"`
			UnitPrice order.Money `json:"unitPrice"`
			At        time.Time   `json:"at"`
		}{e.SKU, e.Quantity, e.UnitPrice, e.At})
		return "order.line-added.v1", data
	}
	return typ, data
}
