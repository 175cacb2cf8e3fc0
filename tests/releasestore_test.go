package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// A release's store is a data directory written by that release's binary, committed under
// testdata/store-<commit>/ with the release's answers in recorded.json, so that every later
// binary is tested against the log as that release wrote it (TestReleaseStoresStayReadable).
//
// To add the store of a release, build nothing by hand: at the release's commit run
//
//	ORDERS_WRITE_STORE=testdata/store-$(git rev-parse --short HEAD) go test -count=1 -run TestWriteReleaseStore ./tests/
//
// which serves a fresh directory with the binary TestMain built, drives it through
// writeReleaseStore, stops it cleanly (the store checkpoints its write-ahead log on close, so
// the files are self-contained), and copies the directory there.

// recordedStore is what a release answered while writing its store.
type recordedStore struct {
	// Requests are every keyed command sent, in order, with the release's answer.
	Requests []recordedRequest `json:"requests"`
	// Orders are GET /v1/orders/{id} and GET /v1/orders/{id}/events after the last request.
	Orders []recordedOrder `json:"orders"`
}

type recordedRequest struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Key    string          `json:"key"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
	Answer json.RawMessage `json:"answer"`
}

type recordedOrder struct {
	ID     string          `json:"id"`
	Order  json.RawMessage `json:"order"`
	Events json.RawMessage `json:"events"`
}

// TestWriteReleaseStore writes the store of the binary under test (see recordedStore) to
// ORDERS_WRITE_STORE; without it, to a directory of its own, which it then serves as
// TestReleaseStoresStayReadable serves a committed one: the store this build writes is one that
// a later build can be tested against.
func TestWriteReleaseStore(t *testing.T) {
	t.Parallel()
	out, check := os.Getenv("ORDERS_WRITE_STORE"), false
	if out == "" {
		out, check = filepath.Join(t.TempDir(), "store-head"), true
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s exists: a release's store is written once", out)
	}
	dir := t.TempDir()
	s := startServer(t, dir)
	rec := writeReleaseStore(t, s)
	s.current().stop(t)
	if t.Failed() {
		return
	}
	if err := os.CopyFS(filepath.Join(out, "data"), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	j, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "recorded.json"), append(j, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if check {
		serveReleaseStore(t, out)
	}
}

// writeReleaseStore drives s through every event type, every status, every kind of duplicate
// charge, a refund and cancellations, and returns what s answered.
func writeReleaseStore(t *testing.T, s *server) *recordedStore {
	rec := &recordedStore{}
	// status 0 takes any 4xx: a refused command is recorded with whatever the release answered.
	send := func(method, path, key string, body any, status int) *response {
		t.Helper()
		var raw []byte
		var payload any // nil sends no body
		if body != nil {
			var err error
			if raw, err = json.Marshal(body); err != nil {
				t.Fatal(err)
			}
			payload = raw
		}
		r := s.do(t, method, path, key, payload)
		if status != 0 || r.status < 400 || r.status > 499 {
			wantStatus(t, r, status)
		}
		rec.Requests = append(rec.Requests, recordedRequest{method, path, key, raw, r.status, r.body})
		return r
	}
	var ids []string
	create := func(key string, body map[string]any) string {
		t.Helper()
		id := createdID(t, send("POST", "/v1/orders", key, body, http.StatusCreated))
		ids = append(ids, id)
		return id
	}
	on := func(id, sub, key string, body any) { send("POST", "/v1/orders/"+id+sub, key, body, http.StatusOK) }
	rejected := func(id, sub, key string, body any) {
		send("POST", "/v1/orders/"+id+sub, key, body, 0)
	}
	lines := []map[string]any{{"sku": "sku-1", "quantity": 2, "unitPrice": 1000}}
	amount := map[string]any{"amount": 2000}
	paid := func(name string) string {
		t.Helper()
		id := create(name+"-create", map[string]any{"customerId": "c-" + name, "currency": "EUR", "lines": lines})
		on(id, "/payments", name+"-start", map[string]any{"paymentId": "pay-" + name, "amount": 2000})
		on(id, "/payments/pay-"+name+"/confirm", name+"-confirm", amount)
		return id
	}

	// created: every line event, a client reference, and a charge on an order awaiting none.
	edited := create("edited-create", map[string]any{"customerId": "c-edited", "currency": "USD", "clientReference": "PO 1001",
		"lines": []map[string]any{{"sku": "sku-1", "quantity": 1, "unitPrice": 250}, {"sku": "sku-2", "quantity": 3, "unitPrice": 99}}})
	send("POST", "/v1/orders/"+edited+"/lines", "edited-add", map[string]any{"sku": "sku-3", "quantity": 1, "unitPrice": 5000}, http.StatusOK)
	send("PUT", "/v1/orders/"+edited+"/lines/sku-1", "edited-change", map[string]any{"quantity": 4}, http.StatusOK)
	send("DELETE", "/v1/orders/"+edited+"/lines/sku-2", "edited-remove", nil, http.StatusOK)
	rejected(edited, "/payments/pay-stray/confirm", "edited-stray", map[string]any{"amount": 100})

	// paying, after a failed payment, with a charge of another payment and one of a wrong amount.
	paying := create("paying-create", map[string]any{"customerId": "c-paying", "currency": "EUR", "lines": lines})
	on(paying, "/payments", "paying-start-1", map[string]any{"paymentId": "pay-paying-1", "amount": 2000})
	on(paying, "/payments/pay-paying-1/fail", "paying-fail", map[string]any{"reason": "card declined"})
	on(paying, "/payments", "paying-start-2", map[string]any{"paymentId": "pay-paying-2", "amount": 2000})
	rejected(paying, "/payments/pay-other/confirm", "paying-other", amount)
	rejected(paying, "/payments/pay-paying-2/confirm", "paying-amount", map[string]any{"amount": 1999})

	// paid, charged twice (once through the provider's callback).
	twice := paid("twice")
	rejected(twice, "/payments/pay-twice-again/confirm", "twice-again", amount)
	send("POST", "/v1/payments/pay-twice/confirm", "twice-callback", amount, http.StatusOK)

	shipped := paid("shipped")
	on(shipped, "/shipments", "shipped-ship", map[string]any{"carrier": "DHL", "trackingNumber": "TRK-1"})

	refunding := paid("refunding")
	on(refunding, "/refunds", "refunding-refund", map[string]any{"refundId": "ref-refunding", "amount": 500})

	refunded := paid("refunded")
	on(refunded, "/shipments", "refunded-ship", map[string]any{"carrier": "UPS", "trackingNumber": "TRK-2"})
	on(refunded, "/refunds", "refunded-refund", map[string]any{"refundId": "ref-refunded", "amount": 2000})
	on(refunded, "/refunds/ref-refunded/complete", "refunded-complete", map[string]any{})

	cancelled := create("cancelled-create", map[string]any{"customerId": "c-cancelled", "currency": "EUR"})
	on(cancelled, "/cancel", "cancelled-cancel", map[string]any{"reason": "changed my mind"})
	abandoned := create("abandoned-create", map[string]any{"customerId": "c-abandoned", "currency": "EUR", "lines": lines})
	on(abandoned, "/payments", "abandoned-start", map[string]any{"paymentId": "pay-abandoned", "amount": 2000})
	on(abandoned, "/cancel", "abandoned-cancel", map[string]any{"reason": "payment abandoned"})
	rejected(abandoned, "/payments/pay-abandoned/confirm", "abandoned-late", amount)

	for _, id := range ids {
		o := s.order(t, id)
		ev := s.do(t, "GET", "/v1/orders/"+id+"/events", "", nil)
		wantStatus(t, ev, http.StatusOK)
		if ev.json["next"] != nil {
			t.Fatalf("%s: events span pages: %v", id, ev)
		}
		rec.Orders = append(rec.Orders, recordedOrder{ID: id, Order: o.body, Events: ev.body})
	}
	if len(rec.Orders) != 8 {
		t.Fatal(fmt.Sprint(len(rec.Orders), " orders recorded"))
	}
	return rec
}
