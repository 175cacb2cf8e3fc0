package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/orders/providers"
)

// A store with provider keys is a data directory in which a binary of an earlier release took
// provider events, committed under testdata/provider-keys-<commit>/ with what it answered in
// recorded.json, so that every later binary is tested against the keys that release gave
// them. Like a release's store (TestWriteReleaseStore), it is written by the binary under
// test, at the release's commit:
//
//	ORDERS_WRITE_PROVIDER_STORE=testdata/provider-keys-$(git rev-parse --short HEAD) go test -count=1 -run TestWriteProviderKeysStore ./tests/
//
// The providers are psp and stripe, alice's, and the keys file is accessKeysFile's.

// providerKeysStore is what a release answered while writing a store with provider keys.
type providerKeysStore struct {
	// Deliveries are every provider event delivered, in order, with the release's answer.
	Deliveries []recordedDelivery `json:"deliveries"`
	// Commands are alice's own keyed commands, in order, with the release's answer.
	Commands []recordedRequest `json:"commands"`
	// Orders are GET /v1/orders/{id} and GET /v1/orders/{id}/events after the last delivery.
	Orders []recordedOrder `json:"orders"`
}

type recordedDelivery struct {
	Provider string          `json:"provider"`
	ID       string          `json:"id"` // the event id (a Standard Webhooks delivery's webhook-id)
	Body     json.RawMessage `json:"body"`
	Status   int             `json:"status"`
	Answer   json.RawMessage `json:"answer"`
}

// TestWriteProviderKeysStore writes a store with provider keys; see providerKeysStore.
func TestWriteProviderKeysStore(t *testing.T) {
	out := os.Getenv("ORDERS_WRITE_PROVIDER_STORE")
	if out == "" {
		t.Skip("ORDERS_WRITE_PROVIDER_STORE names no directory to write a store with provider keys to")
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s exists: a release's store is written once", out)
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp, stripe))
	rec := writeProviderKeysStore(t, s)
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
}

// writeProviderKeysStore has s take an event of each outcome from psp and stripe: applied
// (a payment, a failure, a refund), recorded on the order (a late failure), recorded in the
// provider log (an unknown payment); an event of psp's whose id stripe will use too; and
// alice's own command with the key that an event of psp's will have in s's release. It
// returns what s answered.
func writeProviderKeysStore(t *testing.T, s *server) providerKeysStore {
	var rec providerKeysStore
	deliver := func(p providers.Provider, ev providers.Event, outcome string) {
		t.Helper()
		body, header := signedDelivery(t, p, ev, time.Now())
		r := s.do(t, "POST", "/v1/provider-events/"+p.Name, "", body, header...)
		wantStatus(t, r, http.StatusOK)
		if r.str("outcome") != outcome {
			t.Errorf("%v: want outcome %s", r, outcome)
		}
		rec.Deliveries = append(rec.Deliveries, recordedDelivery{p.Name, ev.ID, body, r.status, r.body})
	}
	paid := s.payingOrder(t, "pay-legacy-paid")
	deliver(psp, succeeded("evt-legacy-paid", "pay-legacy-paid", orderTotal), "applied")
	deliver(psp, refunded("evt-legacy-refund", "pay-legacy-paid", "re-legacy", 500), "applied")
	deliver(psp, failed("evt-legacy-late-failure", "pay-legacy-paid"), "unapplied")
	failing := s.payingOrder(t, "pay-legacy-failed")
	deliver(stripe, failed("evt_legacy_failed", "pay-legacy-failed"), "applied")
	deliver(psp, succeeded("evt-legacy-logged", "pay-legacy-nobody", orderTotal), "unapplied")
	shared := s.payingOrder(t, "pay-legacy-shared")
	deliver(psp, succeeded("msg_legacy_shared", "pay-legacy-shared", orderTotal), "applied")

	create := orderFor("c-legacy-preempt")
	r := s.ok(t, alice, http.StatusCreated, "POST", "/v1/orders", "provider:evt-legacy-preempt", create)
	raw, err := json.Marshal(create)
	if err != nil {
		t.Fatal(err)
	}
	rec.Commands = append(rec.Commands, recordedRequest{"POST", "/v1/orders", "provider:evt-legacy-preempt", raw, r.status, r.body})

	for _, id := range []string{paid, failing, shared, createdID(t, r)} {
		o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil)
		ev := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id+"/events", "", nil)
		rec.Orders = append(rec.Orders, recordedOrder{id, o.body, ev.body})
	}
	return rec
}
