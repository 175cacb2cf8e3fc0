package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/providers"
	"github.com/google/go-cmp/cmp"
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

// TestWriteProviderKeysStore writes a store with provider keys (see providerKeysStore) to
// ORDERS_WRITE_PROVIDER_STORE; without it, to a directory of its own, which it then serves as
// the tests of a committed one do: the store this build writes is one that a later build can
// be tested against.
func TestWriteProviderKeysStore(t *testing.T) {
	t.Parallel()
	out, check := os.Getenv("ORDERS_WRITE_PROVIDER_STORE"), false
	if out == "" {
		out, check = filepath.Join(t.TempDir(), "provider-keys-head"), true
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
	if check {
		t.Run("kept", func(t *testing.T) { serveProviderKeysStore(t, out) })
		for _, swept := range []bool{false, true} {
			t.Run(fmt.Sprintf("past TTL, swept=%v", swept), func(t *testing.T) { serveProviderKeysPastTTL(t, out, swept) })
		}
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

// An event id is unique among one provider's events only: two providers of one principal may
// each send an event of the same id, and each is its own event, applied once. The key of each
// names its provider, as GET /v1/idempotency-keys shows it.
func TestProviderEventIDsArePerProvider(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	orders := map[string]string{}
	answers := map[string]*response{}
	for _, p := range []providers.Provider{psp, stripe} {
		pay := "pay-same-id-" + p.Name
		orders[p.Name] = s.payingOrder(t, pay)
		answers[p.Name] = s.deliverOK(t, p, succeeded("evt_same_id", pay, orderTotal), "applied")
	}
	for _, p := range []providers.Provider{psp, stripe} {
		checkReplay(t, answers[p.Name], s.deliver(t, p, succeeded("evt_same_id", "pay-same-id-"+p.Name, orderTotal)))
		id := orders[p.Name]
		if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paid" {
			t.Errorf("order of %s's event: %v; want paid", p.Name, o)
		}
		if types := s.eventTypes(t, id); countType(types, "payment-confirmed") != 1 {
			t.Errorf("order of %s's event: events %v; want one payment", p.Name, types)
		}
		key := "provider·" + p.Name + "·evt_same_id"
		k := s.ok(t, alice, http.StatusOK, "GET", "/v1/idempotency-keys/"+url.PathEscape(key), "", nil)
		if k.str("key") != key || k.str("path") != "/v1/provider-events/"+p.Name || k.str("orderId") != id {
			t.Errorf("key of %s's event: %v; want %s, on its path and order", p.Name, k, key)
		}
	}
}

// A client cannot claim the key of a provider's event before the event comes: not in the form
// earlier releases gave it (provider:<event id>), which is just one more key of the client's,
// nor in today's, which no Idempotency-Key may take.
func TestProviderEventKeysCannotBeTakenByClients(t *testing.T) {
	t.Parallel()
	s := startWithProviders(t)
	s.ok(t, alice, http.StatusCreated, "POST", "/v1/orders", "provider:evt-taken", orderFor("c-taken"))
	r, err := s.send(t, request{method: "POST", path: "/v1/orders", key: "provider·psp·evt-taken", body: orderFor("c-taken"),
		header: alice, invalid: true})
	if err != nil {
		t.Fatal(err)
	}
	checkProblem(t, r, http.StatusBadRequest, "idempotency-key-invalid")

	id := s.payingOrder(t, "pay-taken")
	s.deliverOK(t, psp, succeeded("evt-taken", "pay-taken", orderTotal), "applied")
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paid" {
		t.Errorf("after the provider's event: %v; want paid", o)
	}
}

// The provider events that a release took under its keys (provider:<event id>) are recognised
// by the binary under test while their keys are kept: each redelivery answers what the release
// answered, as a replay, and no order gains an event, nor the provider log a record. The keys
// of that form stand in no one's way: stripe's event with the id of one of psp's, and psp's
// event with the id that alice used as her own key, are applied.
func TestProviderKeysOfEarlierRelease(t *testing.T) {
	t.Parallel()
	for _, store := range committedStores(t, "provider-keys-*") {
		t.Run(filepath.Base(store), func(t *testing.T) {
			t.Parallel()
			serveProviderKeysStore(t, store)
		})
	}
}

// Past any key TTL, the provider events that a release took under its keys are still
// recognised, as its other commands are: each redelivery answers what the release answered,
// and nothing is recorded again. The keys are expired (a TTL of 1 s), and then swept (their
// streams deleted, as the sweeper does once their claims' own expiry has passed): the events
// are found on their orders, whose events carry their keys, or in the provider log.
func TestProviderKeysOfEarlierReleasePastTTL(t *testing.T) {
	t.Parallel()
	for _, store := range committedStores(t, "provider-keys-*") {
		for _, swept := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/swept=%v", filepath.Base(store), swept), func(t *testing.T) {
				t.Parallel()
				serveProviderKeysPastTTL(t, store, swept)
			})
		}
	}
}

// serveProviderKeysStore serves a copy of store with its keys kept (see
// TestProviderKeysOfEarlierRelease).
func serveProviderKeysStore(t *testing.T, store string) {
	rec, dir := openCommittedStore[providerKeysStore](t, store)
	s := startServer(t, dir, "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp, stripe),
		"--key-ttl", keyTTLCovering(t, recordedStore{Orders: rec.Orders}).String())
	for _, d := range rec.Deliveries {
		r := s.redeliver(t, d)
		if r.status != d.Status || !cmp.Equal(decodeJSON(t, r.body), decodeJSON(t, d.Answer)) || r.replayed() != "true" {
			t.Errorf("%s's event %s delivered again: %v, replayed %q\nwant %d %s, replayed", d.Provider, d.ID, r, r.replayed(), d.Status, d.Answer)
		}
	}
	for _, q := range rec.Commands {
		r := s.as(t, alice, q.Method, q.Path, q.Key, []byte(q.Body))
		if r.status != q.Status || !cmp.Equal(decodeJSON(t, r.body), decodeJSON(t, q.Answer)) || r.replayed() != "true" {
			t.Errorf("alice's key %s again: %v\nwant %d %s, replayed", q.Key, r, q.Status, q.Answer)
		}
	}
	checkProviderStoreOrders(t, s, rec)

	shared := s.payingOrder(t, "pay-shared-now")
	s.deliverOK(t, stripe, succeeded("msg_legacy_shared", "pay-shared-now", orderTotal), "applied")
	taken := s.payingOrder(t, "pay-taken-now")
	s.deliverOK(t, psp, succeeded("evt-legacy-preempt", "pay-taken-now", orderTotal), "applied")
	for _, id := range []string{shared, taken} {
		if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paid" {
			t.Errorf("%v; want paid", o)
		}
	}
}

// serveProviderKeysPastTTL serves a copy of store past its keys' TTL, their streams deleted
// if swept (see TestProviderKeysOfEarlierReleasePastTTL).
func serveProviderKeysPastTTL(t *testing.T, store string, swept bool) {
	rec, dir := openCommittedStore[providerKeysStore](t, store)
	if swept {
		sweepKeys(t, dir)
	}
	s := startServer(t, dir, "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp, stripe),
		"--key-ttl", "1s")
	for _, d := range rec.Deliveries {
		r := s.redeliver(t, d)
		if r.status != d.Status || !cmp.Equal(decodeJSON(t, r.body), decodeJSON(t, d.Answer)) || r.replayed() != "true" {
			t.Errorf("%s's event %s delivered again past its key's TTL: %v, replayed %q\nwant %d %s, replayed",
				d.Provider, d.ID, r, r.replayed(), d.Status, d.Answer)
		}
	}
	checkProviderStoreOrders(t, s, rec)
}

// sweepKeys deletes every key stream of the embedded store in dir; the server must be stopped.
func sweepKeys(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	streams := map[string]bool{}
	for e, err := range st.ReadAll(ctx, eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{idempotency.StreamPrefix}}}) {
		if err != nil {
			t.Fatal(err)
		}
		streams[e.Stream] = true
	}
	if len(streams) == 0 {
		t.Fatal("no key stream to sweep")
	}
	for stream := range streams {
		if err := st.DeleteStream(ctx, stream, eventstore.Any); err != nil {
			t.Fatal(err)
		}
	}
}

// redeliver sends the recorded delivery d again, as its provider does: the same body, signed
// now.
func (s *server) redeliver(t *testing.T, d recordedDelivery) *response {
	t.Helper()
	p := map[string]providers.Provider{psp.Name: psp, stripe.Name: stripe}[d.Provider]
	h, err := p.Sign(d.ID, time.Now(), d.Body)
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	for k, vs := range h {
		for _, v := range vs {
			header = append(header, k, v)
		}
	}
	return s.do(t, "POST", "/v1/provider-events/"+d.Provider, "", []byte(d.Body), header...)
}

// checkProviderStoreOrders checks that every order of rec, and its events, are as the
// release recorded them, and that the provider log holds what it recorded there, once.
func checkProviderStoreOrders(t *testing.T, s *server, rec providerKeysStore) {
	t.Helper()
	for _, o := range rec.Orders {
		got := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+o.ID, "", nil)
		if d := cmp.Diff(decodeJSON(t, o.Order), decodeJSON(t, got.body)); d != "" {
			t.Errorf("order %s (-recorded +served):\n%s", o.ID, d)
		}
		ev := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+o.ID+"/events", "", nil)
		if d := cmp.Diff(decodeJSON(t, o.Events), decodeJSON(t, ev.body)); d != "" {
			t.Errorf("events of order %s (-recorded +served):\n%s", o.ID, d)
		}
	}
	var logged []string
	for _, u := range s.unapplied(t) {
		logged = append(logged, u["provider"].(string)+" "+u["eventId"].(string))
	}
	slices.Sort(logged)
	if want := []string{"psp evt-legacy-late-failure", "psp evt-legacy-logged"}; !slices.Equal(logged, want) {
		t.Errorf("provider events not applied: %v; want %v", logged, want)
	}
}
