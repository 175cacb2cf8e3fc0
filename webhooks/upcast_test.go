package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/webhooks"
	"github.com/google/uuid"
)

// Order events stored in an earlier version (order.created.v1 without a channel,
// order.line-added.v1 without a product name) are delivered as the current version reads them:
// the payload's event and order have the channel "unknown", the line no name.
func TestOldEventVersionsAreDeliveredUpcast(t *testing.T) {
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var mu sync.Mutex
	var got []webhooks.Payload
	var raw []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p webhooks.Payload
		var m map[string]any
		if json.Unmarshal(body, &p) != nil || json.Unmarshal(body, &m) != nil {
			t.Errorf("undecodable delivery %s", body)
		}
		mu.Lock()
		got, raw = append(got, p), append(raw, m)
		mu.Unlock()
	}))
	defer recv.Close()
	ctx := context.Background()
	cfg := webhooks.DefaultConfig()
	cfg.AllowPrivate, cfg.SingleNode = true, true
	sealer, _ := webhooks.NewSealer(make([]byte, 32))
	svc := &webhooks.Service{Store: store, Feed: store, Config: &cfg, Node: "n", Log: slog.New(slog.DiscardHandler),
		Endpoints: &webhooks.Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	if _, err := webhooks.Register(ctx, svc.Endpoints, "shop", "k", recv.URL, []string{"*"}, ""); err != nil {
		t.Fatal(err)
	}
	md, _ := json.Marshal(command.Metadata{Principal: "shop", Command: "old", At: time.Now()})
	old := []eventstore.EventData{
		{ID: uuid.Must(uuid.NewV7()), Type: "order.created.v1", Metadata: md,
			Data: []byte(`{"orderId":"o-1","customerId":"c-1","currency":"EUR","clientRef":"","at":"2025-01-02T03:04:05Z"}`)},
		{ID: uuid.Must(uuid.NewV7()), Type: "order.line-added.v1", Metadata: md,
			Data: []byte(`{"sku":"sku-1","quantity":2,"unitPrice":{"amount":150,"currency":"EUR"},"at":"2025-01-02T03:04:06Z"}`)},
	}
	if _, err := store.Append(ctx, command.StreamName("o-1"), eventstore.NoStream, old...); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries", n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	created, line := got[0], got[1]
	event := func(i int) map[string]any { return raw[i]["data"].(map[string]any)["event"].(map[string]any) }
	if created.Type != "order.created" || event(0)["channel"] != "unknown" || created.Data.Order.Channel != "unknown" {
		t.Errorf("created: type %s, event %v, order channel %q", created.Type, event(0), created.Data.Order.Channel)
	}
	if line.Type != "order.line-added" || event(1)["sku"] != "sku-1" || len(line.Data.Order.Lines) != 1 ||
		line.Data.Order.Lines[0].Quantity != 2 || line.Data.Order.Channel != "unknown" {
		t.Errorf("line added: type %s, event %v, order %+v", line.Type, event(1), line.Data.Order)
	}
	if _, ok := event(1)["name"]; ok {
		t.Errorf("the line added has a name: %v", event(1))
	}
	if created.ID != old[0].ID.String() || line.ID != old[1].ID.String() {
		t.Errorf("delivery ids %s, %s; want the events' %s, %s", created.ID, line.ID, old[0].ID, old[1].ID)
	}
}
