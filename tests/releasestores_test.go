package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/idempotency"
	"github.com/google/go-cmp/cmp"
)

// upcasts are the event versions a later release reads by upcasting, with the type each reads
// as and the fields, with their defaults, that the upcast adds to its data (the defaults
// api/openapi.yaml states). An answer about a release's store may differ from the recorded one
// only by these.
var upcasts = map[string]struct {
	to    string
	added map[string]any
}{
	"order.created.v1":    {"order.created.v2", map[string]any{"channel": "unknown"}},
	"order.line-added.v1": {"order.line-added.v2", nil},
}

// orderFieldsAdded are the fields an order answer gained since a release, with the value they
// have for orders from that release's store.
var orderFieldsAdded = map[string]any{"channel": "unknown"}

// Every committed store of an earlier release (testdata/store-*, see TestWriteReleaseStore)
// is served by the binary under test: the same orders and events as the release recorded
// (apart from upcasting's documented, additive fields), the read models rebuilt from it, its
// keys replayed with their bodies, new commands on its orders, and an audit without findings.
//
// A release's keys are as old as its store, so the store is served with a key TTL that covers
// its age on whatever day the test runs; TestReleaseKeysPastTTL shows what they do past it.
func TestReleaseStoresStayReadable(t *testing.T) {
	t.Parallel()
	for _, store := range releaseStores(t) {
		t.Run(filepath.Base(store), func(t *testing.T) {
			t.Parallel()
			serveReleaseStore(t, store)
		})
	}
}

// serveReleaseStore serves a copy of the release's store with the binary under test and checks
// what TestReleaseStoresStayReadable says.
func serveReleaseStore(t *testing.T, store string) {
	rec, dir := openReleaseStore(t, store)
	s := startServer(t, dir, "--key-ttl", keyTTLCovering(t, rec).String())
	checkRecordedOrders(t, s, rec)
	checkListed(t, s, rec)
	checkReplays(t, s, rec)

	out, code := runAPI(t, "projections", "rebuild", "--url", s.url(""))
	if code != 0 {
		t.Fatalf("projections rebuild: exit %d:\n%s", code, out)
	}
	checkListed(t, s, rec)

	commandOldOrders(t, s, rec)
	s.current().stop(t)
	out, code = runAPI(t, "audit", "verify", "--data", dir)
	if code != 0 || !strings.Contains(out, "no findings") {
		t.Fatalf("audit verify: exit %d:\n%s", code, out)
	}
}

// Past any key TTL, a release's keys are gone, but its commands on its orders are still
// recognised from the order's events, which carry their keys: each accepted one answers what
// the release answered, each refused charge is refused again, and no order gains an event. A
// create is recognised by nothing once its key is gone: with a client reference it is refused
// as that reference's second order; without one it is a new order, as any create with an
// unknown key.
func TestReleaseKeysPastTTL(t *testing.T) {
	t.Parallel()
	for _, store := range releaseStores(t) {
		t.Run(filepath.Base(store), func(t *testing.T) {
			t.Parallel()
			rec, dir := openReleaseStore(t, store)
			s := startServer(t, dir, "--key-ttl", "1s")
			for _, q := range rec.Requests {
				var body any
				if string(q.Body) != "null" {
					body = []byte(q.Body)
				}
				r := s.do(t, q.Method, q.Path, q.Key, body)
				if q.Method == "POST" && q.Path == "/v1/orders" {
					checkCreatePastTTL(t, q, r)
					continue
				}
				if q.Status >= 300 {
					// A refused charge is found among the order's duplicate charges, and refused
					// again in today's words.
					if r.status < 400 || r.status >= 500 {
						t.Errorf("key %s past its TTL, refused by the release: %v; want a 4xx", q.Key, r)
					}
					continue
				}
				if r.status != q.Status || !cmp.Equal(any(asRecorded(t, r.json, q.Answer)), decodeJSON(t, q.Answer)) {
					t.Errorf("key %s past its TTL: %v\nwant %d %s", q.Key, r, q.Status, q.Answer)
				}
			}
			checkRecordedOrders(t, s, rec)
		})
	}
}

// checkCreatePastTTL checks r, the answer to q, a release's create sent again once its key
// is gone.
func checkCreatePastTTL(t *testing.T, q recordedRequest, r *response) {
	t.Helper()
	var sent, answered struct {
		ID              string `json:"id"`
		ClientReference string `json:"clientReference"`
	}
	_ = json.Unmarshal(q.Body, &sent)
	_ = json.Unmarshal(q.Answer, &answered)
	switch {
	case q.Status != http.StatusCreated:
		// A refused create was never an order: refused again or made now, never replayed.
		if r.replayed() == "true" {
			t.Errorf("create %s past its TTL, refused by the release: replayed %v", q.Key, r)
		}
	case sent.ClientReference != "":
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "client reference already used") {
			t.Errorf("create %s with client reference %q past its TTL: %v; want 422, the reference in use", q.Key, sent.ClientReference, r)
		}
	default:
		if r.status != http.StatusCreated || r.replayed() == "true" || r.str("id") == answered.ID {
			t.Errorf("create %s past its TTL: %v; want a new order, not %s", q.Key, r, answered.ID)
		}
	}
}

// releaseStores are the committed stores of earlier releases.
func releaseStores(t *testing.T) []string { return committedStores(t, "store-*") }

// committedStores are the directories under testdata that match pattern: stores written by
// earlier releases, each its data and what the release recorded of it.
func committedStores(t *testing.T, pattern string) []string {
	t.Helper()
	stores, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(stores) == 0 {
		t.Fatalf("no store %s under testdata (%v)", pattern, err)
	}
	return stores
}

// openReleaseStore reads what the release under store recorded and copies its data to a
// fresh directory, which it returns.
func openReleaseStore(t *testing.T, store string) (recordedStore, string) {
	return openCommittedStore[recordedStore](t, store)
}

// openCommittedStore reads what the release under store recorded (recorded.json, as an R) and
// copies its data to a fresh directory, which it returns.
func openCommittedStore[R any](t *testing.T, store string) (R, string) {
	t.Helper()
	var rec R
	raw, err := os.ReadFile(filepath.Join(store, "recorded.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(store, "data"))); err != nil {
		t.Fatal(err)
	}
	return rec, dir
}

// keyTTLCovering is a key TTL under which every key of rec's store is still kept today: the
// age of its oldest order, and a day.
func keyTTLCovering(t *testing.T, rec recordedStore) time.Duration {
	t.Helper()
	oldest := time.Now()
	for _, o := range rec.Orders {
		var v struct {
			CreatedAt time.Time `json:"createdAt"`
		}
		if err := json.Unmarshal(o.Order, &v); err != nil || v.CreatedAt.IsZero() {
			t.Fatalf("order %s: no createdAt (%v)", o.ID, err)
		}
		if v.CreatedAt.Before(oldest) {
			oldest = v.CreatedAt
		}
	}
	return time.Since(oldest).Truncate(time.Hour) + 24*time.Hour
}

// decodeJSON decodes raw with numbers as json.Number.
func decodeJSON(t testing.TB, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// asRecorded is an order answer of the binary under test as the release answered it
// (recorded): the fields added since that release (those its answer lacks) must be there with
// their stated values, and are then removed.
func asRecorded(t testing.TB, o map[string]any, recorded json.RawMessage) map[string]any {
	t.Helper()
	var had map[string]any
	_ = json.Unmarshal(recorded, &had)
	for name, want := range orderFieldsAdded {
		if _, ok := had[name]; ok {
			continue
		}
		if o[name] != want {
			t.Errorf("order %v: %s is %v, want %v", o["id"], name, o[name], want)
		}
		delete(o, name)
	}
	return o
}

// eventsAsRecorded is an events page of the binary under test as the release answered it:
// every upcast event must name its stored type, read as its upcast's type, and carry the
// fields the upcast adds with their defaults; those are then removed.
func eventsAsRecorded(t testing.TB, page map[string]any) map[string]any {
	t.Helper()
	events, _ := page["events"].([]any)
	for _, e := range events {
		e := e.(map[string]any)
		stored, ok := e["storedType"].(string)
		if !ok {
			continue
		}
		up, known := upcasts[stored]
		if !known || e["type"] != up.to {
			t.Errorf("event %v: stored as %s, shown as %v; want %v", e["revision"], stored, e["type"], up.to)
			continue
		}
		data := e["data"].(map[string]any)
		for name, want := range up.added {
			if data[name] != want {
				t.Errorf("event %v (%s): %s is %v, want %v", e["revision"], stored, name, data[name], want)
			}
			delete(data, name)
		}
		e["type"] = stored
		delete(e, "storedType")
	}
	return page
}

func checkRecordedOrders(t *testing.T, s *server, rec recordedStore) {
	t.Helper()
	for _, o := range rec.Orders {
		got := asRecorded(t, s.order(t, o.ID).json, o.Order)
		if d := cmp.Diff(decodeJSON(t, o.Order), any(got)); d != "" {
			t.Errorf("order %s (-recorded +served):\n%s", o.ID, d)
		}
		ev := s.do(t, "GET", "/v1/orders/"+o.ID+"/events", "", nil)
		wantStatus(t, ev, http.StatusOK)
		if d := cmp.Diff(decodeJSON(t, o.Events), any(eventsAsRecorded(t, ev.json))); d != "" {
			t.Errorf("events of order %s (-recorded +served):\n%s", o.ID, d)
		}
	}
}

// checkListed checks that the orders read model lists every order as recorded, once the
// projection has caught up (a new read model version rebuilds it after the start).
func checkListed(t *testing.T, s *server, rec recordedStore) {
	t.Helper()
	var listed []listedOrder
	caughtUp := eventually(30*time.Second, func() bool {
		all, err := s.tryListAll(t, url.Values{})
		listed = all
		return err == nil && len(all) == len(rec.Orders)
	})
	if !caughtUp {
		t.Fatalf("the orders read model lists %d orders, want %d", len(listed), len(rec.Orders))
	}
	recorded := map[string]json.RawMessage{}
	for _, o := range rec.Orders {
		recorded[o.ID] = o.Order
	}
	byID := map[string]map[string]any{}
	for _, o := range listed {
		byID[o.ID] = asRecorded(t, o.Raw, recorded[o.ID])
	}
	for _, o := range rec.Orders {
		if d := cmp.Diff(decodeJSON(t, o.Order), any(byID[o.ID])); d != "" {
			t.Errorf("listed order %s (-recorded +listed):\n%s", o.ID, d)
		}
	}
}

// checkReplays sends every recorded command again, with its key and body: each answers what
// the release answered, as a replay; none is decided again. The fingerprint the binary takes
// of each body is the one the release stored in the order's events.
func checkReplays(t *testing.T, s *server, rec recordedStore) {
	t.Helper()
	stored := map[string]string{} // idempotency key → fingerprint in the events' metadata
	for _, o := range rec.Orders {
		var page struct {
			Events []struct {
				Metadata struct {
					IdempotencyKey string `json:"idempotencyKey"`
					Fingerprint    string `json:"fingerprint"`
				} `json:"metadata"`
			} `json:"events"`
		}
		if err := json.Unmarshal(o.Events, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			stored[e.Metadata.IdempotencyKey] = e.Metadata.Fingerprint
		}
	}
	for _, q := range rec.Requests {
		var body any   // nil sends none
		var raw []byte // recorded as null when none was sent
		if string(q.Body) != "null" {
			body, raw = []byte(q.Body), q.Body
		}
		if want, ok := stored[q.Key]; ok {
			got, err := idempotency.Fingerprint(q.Method, q.Path, raw)
			if err != nil || got != want {
				t.Errorf("key %s: fingerprint %s, %v; the release stored %s", q.Key, got, err, want)
			}
		}
		r := s.do(t, q.Method, q.Path, q.Key, body)
		// recorded.json holds the answers re-indented: compared as JSON, not as bytes.
		if r.status != q.Status || !cmp.Equal(decodeJSON(t, r.body), decodeJSON(t, q.Answer)) {
			t.Errorf("replay of key %s: %v\nwant %d %s", q.Key, r, q.Status, q.Answer)
		}
		if r.replayed() != "true" {
			t.Errorf("replay of key %s: Idempotent-Replayed %q, want true", q.Key, r.replayed())
		}
	}
}

// commandOldOrders takes orders of the store further with commands of the binary under test.
func commandOldOrders(t *testing.T, s *server, rec recordedStore) {
	t.Helper()
	ids := map[string]string{}      // customer → order id
	channels := map[string]string{} // customer → channel, "unknown" for a release before channels
	for _, o := range rec.Orders {
		v := struct {
			ID         string `json:"id"`
			CustomerID string `json:"customerId"`
			Channel    string `json:"channel"`
		}{Channel: orderFieldsAdded["channel"].(string)}
		if err := json.Unmarshal(o.Order, &v); err != nil {
			t.Fatal(err)
		}
		ids[v.CustomerID], channels[v.CustomerID] = v.ID, v.Channel
	}
	edited := s.command(t, ids["c-edited"], "/lines", "new-edited-add", map[string]any{"sku": "sku-9", "name": "Tea, 250 g", "quantity": 1, "unitPrice": 700})
	if lines, _ := edited.json["lines"].([]any); len(lines) != 3 || lines[2].(map[string]any)["name"] != "Tea, 250 g" ||
		lines[0].(map[string]any)["name"] != nil || edited.str("channel") != channels["c-edited"] {
		t.Errorf("a named line added to an old order: %v", edited)
	}
	for _, c := range []struct{ customer, sub, key, status string }{
		{"c-paying", "/payments/pay-paying-2/fail", "new-paying-fail", "created"},
		{"c-refunding", "/refunds/ref-refunding/complete", "new-refunding-complete", "refunded"},
		{"c-shipped", "/refunds", "new-shipped-refund", "refunding"},
	} {
		body := map[string]any{}
		switch c.key {
		case "new-shipped-refund":
			body = map[string]any{"refundId": "ref-new", "amount": 2000}
		case "new-paying-fail":
			body = map[string]any{"reason": "expired"}
		}
		if r := s.command(t, ids[c.customer], c.sub, c.key, body); r.str("status") != c.status {
			t.Errorf("%s on an old order: %v; want %s", c.sub, r, c.status)
		}
	}
	r := s.do(t, "POST", "/v1/orders", "new-create", map[string]any{"customerId": "c-new", "currency": "EUR", "channel": "store",
		"lines": []map[string]any{{"sku": "sku-1", "name": "Espresso beans, 1 kg", "quantity": 1, "unitPrice": 1250}}})
	id := createdID(t, r)
	if r.str("channel") != "store" {
		t.Errorf("a new order with a channel: %v", r)
	}
	evs := s.events(t, id)
	if got := types(evs); !cmp.Equal(got, []string{"order.created.v2", "order.line-added.v2"}) || evs[0].Data["channel"] != "store" ||
		evs[1].Data["name"] != "Espresso beans, 1 kg" {
		t.Errorf("a new order's events: %v", evs)
	}
}
