package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
)

// racingOrders is the embedded store with another process beside it: while racing, that
// process adds a line to an order just before each write to the order's stream, so that the
// write is refused for the revision it expected.
type racingOrders struct {
	*sqlite.Store
	racing atomic.Bool
	raced  atomic.Int32
	other  *command.Handler // the other process, writing to the store directly
}

func (r *racingOrders) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	for _, a := range appends {
		if id, ok := strings.CutPrefix(a.Stream, command.StreamName("")); ok && r.racing.Load() {
			n := r.raced.Add(1)
			line := order.AddLine{SKU: fmt.Sprint("race-", n), Quantity: 1, UnitPrice: order.Money{Amount: 1, Currency: "EUR"}}
			if _, err := r.other.Handle(ctx, id, line, command.Metadata{Principal: "local", IdempotencyKey: fmt.Sprint("race-", n)}); err != nil {
				return nil, fmt.Errorf("the racing process: %w", err)
			}
		}
	}
	return r.Store.MultiStreamAppend(ctx, appends...)
}

// A command that the order kept changing under is answered 409 concurrent-modification and
// not stored for its key: a retry with the same key runs the command, once, and the retries
// after it replay that answer.
func TestConflictIsNotStoredForTheKey(t *testing.T) {
	var racer *racingOrders
	srv, _ := newServer(t, func(s eventstore.Store) eventstore.Store {
		racer = &racingOrders{Store: s.(*sqlite.Store), other: &command.Handler{Store: s}}
		return racer
	})
	srv.Orders.RetryFor = -1 // the first refused write is the conflict
	h := srv.Handler()
	created := keyedPost(h, "/v1/orders", "create", strings.NewReader(`{"customerId":"c-1","currency":"EUR"}`), -1)
	if created.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Code, created.Body)
	}
	var o struct {
		ID    string `json:"id"`
		Lines []struct {
			SKU string `json:"sku"`
		} `json:"lines"`
	}
	if err := json.Unmarshal(created.Body.Bytes(), &o); err != nil {
		t.Fatal(err)
	}
	path, line := "/v1/orders/"+o.ID+"/lines", `{"sku":"sku-1","quantity":2,"unitPrice":300}`

	racer.racing.Store(true)
	r := keyedPost(h, path, "add", strings.NewReader(line), -1)
	if r.Code != http.StatusConflict || !strings.Contains(r.Body.String(), "/problems/concurrent-modification") || r.Header().Get("Retry-After") == "" {
		t.Fatalf("while another process changes the order: %d %v %s; want 409 concurrent-modification with Retry-After", r.Code, r.Header(), r.Body)
	}
	racer.racing.Store(false)

	first := keyedPost(h, path, "add", strings.NewReader(line), -1)
	if first.Code != http.StatusOK || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("the retry with the key: %d %v %s; want the command run, 200", first.Code, first.Header(), first.Body)
	}
	if err := json.Unmarshal(first.Body.Bytes(), &o); err != nil {
		t.Fatal(err)
	}
	var skus []string
	for _, l := range o.Lines {
		skus = append(skus, l.SKU)
	}
	if want := []string{"race-1", "sku-1"}; fmt.Sprint(skus) != fmt.Sprint(want) {
		t.Errorf("lines after the retry: %v; want %v (the other process's, then the command's, once)", skus, want)
	}
	again := keyedPost(h, path, "add", strings.NewReader(line), -1)
	if again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Errorf("a retry after it: %d %v %s; want the answer replayed", again.Code, again.Header(), again.Body)
	}
}
