package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMissingKeyIsRejected(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	r := s.doInvalid(t, "POST", "/v1/orders", "", orderFor("c-missing"))
	checkProblem(t, r, http.StatusBadRequest, "idempotency-key-missing")

	// The rejected request was not run and not stored: with a key it creates one order.
	id, created := s.create(t, "missing-then-keyed", "c-missing")
	checkFirst(t, created)
	if evs := s.events(t, id); count(evs, "order.created.v2", "", "") != 1 || len(evs) != 2 {
		t.Errorf("order %s has events %v; want created and one line added", id, types(evs))
	}

	// Commands on an existing order without a key leave it as it was.
	for _, c := range []struct {
		path string
		body any
	}{
		{"/lines", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}},
		{"/cancel", map[string]any{"reason": "no key"}},
		{"/payments", map[string]any{"paymentId": "pay-1", "amount": orderTotal}},
	} {
		r := s.doInvalid(t, "POST", "/v1/orders/"+id+c.path, "", c.body)
		checkProblem(t, r, http.StatusBadRequest, "idempotency-key-missing")
	}
	if o := s.order(t, id); o.num("version") != 2 || o.str("status") != "created" {
		t.Errorf("after keyless commands: %v; want the order unchanged at version 2, created", o)
	}
}

func TestMalformedKeyIsRejected(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "malformed-setup", "c-malformed")

	for _, tc := range []struct {
		name string
		key  string
	}{
		{"empty", ""},
		{"256 characters", strings.Repeat("k", 256)},
		{"control character", "abc\tdef"},
		{"non-ASCII", "clé-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Set the header directly: request.key "" would send none.
			hdr := []string{"Idempotency-Key", tc.key}
			r := s.doInvalid(t, "POST", "/v1/orders", "", orderFor("c-malformed"), hdr...)
			checkProblem(t, r, http.StatusBadRequest, "idempotency-key-invalid")
			r = s.doInvalid(t, "POST", "/v1/orders/"+id+"/lines", "", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}, hdr...)
			checkProblem(t, r, http.StatusBadRequest, "idempotency-key-invalid")
		})
	}
	if o := s.order(t, id); o.num("version") != 2 {
		t.Errorf("after malformed keys: %v; want the order unchanged at version 2", o)
	}

	// The limits themselves are valid keys, and each is stored under all of its characters.
	var printable strings.Builder // 0x21…0x7E cycled, a space inside (HTTP trims it at the ends)
	for i := range 255 {
		if i == 100 {
			printable.WriteByte(' ')
			continue
		}
		printable.WriteByte(byte(0x21 + i%94))
	}
	for _, key := range []string{printable.String(), "x", printable.String()[:254] + "!"} {
		first := s.do(t, "POST", "/v1/orders", key, orderFor("c-limits"))
		createdID(t, first)
		checkFirst(t, first)
		checkReplay(t, first, s.do(t, "POST", "/v1/orders", key, orderFor("c-limits")))
	}
}

func TestReplayReturnsTheStoredResponse(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	first := s.do(t, "POST", "/v1/orders", "replay-create", orderFor("c-replay"))
	id := createdID(t, first)
	checkFirst(t, first)
	if got, want := first.header.Get("ETag"), etag(first.num("version")); got != want {
		t.Errorf("create: ETag %q, want %q", got, want)
	}
	checkLogPosition(t, first)
	checkReplay(t, first, s.do(t, "POST", "/v1/orders", "replay-create", orderFor("c-replay")))
	if evs := s.events(t, id); count(evs, "order.created.v2", "", "") != 1 {
		t.Errorf("order %s has events %v; want one order.created.v2", id, types(evs))
	}

	// A command replays its own answer even after the order moved on under another key.
	add := s.command(t, id, "/lines", "replay-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	checkFirst(t, add)
	checkLogPosition(t, add)
	later := s.command(t, id, "/lines", "replay-later", line{SKU: "sku-3", Quantity: 1, UnitPrice: 700})
	again := s.do(t, "POST", "/v1/orders/"+id+"/lines", "replay-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	checkReplay(t, add, again)

	o := s.order(t, id)
	if o.num("total") != orderTotal+500+700 || o.num("version") != later.num("version") {
		t.Errorf("after the replay: %v; want total %d at version %d (sku-2 added once)", o, orderTotal+500+700, later.num("version"))
	}
	if evs := s.events(t, id); count(evs, "order.line-added.v2", "sku", "sku-2") != 1 {
		t.Errorf("order %s has events %v; want sku-2 added once", id, types(evs))
	}
}

func checkLogPosition(t *testing.T, r *response) {
	t.Helper()
	p := r.header.Get("Log-Position")
	if p == "" || strings.Trim(p, "0123456789") != "" {
		t.Errorf("%s: Log-Position %q, want a non-negative integer", r.req, p)
	}
}

func TestKeyOptionalOnPutAndDelete(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "put-create", "c-put")
	sku1 := "/v1/orders/" + id + "/lines/sku-1"

	r := s.do(t, "PUT", sku1, "", map[string]any{"quantity": 5})
	wantStatus(t, r, http.StatusOK)
	if r.num("total") != 5000 {
		t.Errorf("%v; want total 5000", r)
	}

	keyed := s.do(t, "PUT", sku1, "put-key", map[string]any{"quantity": 3})
	wantStatus(t, keyed, http.StatusOK)
	checkFirst(t, keyed)
	wantStatus(t, s.do(t, "PUT", sku1, "", map[string]any{"quantity": 4}), http.StatusOK)
	// The keyed PUT replays its answer (quantity 3) instead of setting 3 again.
	checkReplay(t, keyed, s.do(t, "PUT", sku1, "put-key", map[string]any{"quantity": 3}))
	if o := s.order(t, id); o.num("total") != 4000 {
		t.Errorf("%v; want total 4000 (the replayed PUT changed nothing)", o)
	}

	s.command(t, id, "/lines", "put-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	r = s.do(t, "DELETE", "/v1/orders/"+id+"/lines/sku-2", "", nil)
	wantStatus(t, r, http.StatusOK)
	if r.num("total") != 4000 {
		t.Errorf("%v; want total 4000 after removing sku-2", r)
	}
}

func TestKeyReusedForAnotherRequest(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")

	first := s.do(t, "POST", "/v1/orders", "reuse-create", orderFor("c-1"))
	idA := createdID(t, first)
	// The fingerprint is over canonical JSON: key order and whitespace make no other request.
	reordered := `{ "lines": [ {"unitPrice": 1000, "quantity": 2, "sku": "sku-1"} ],
		"currency": "EUR",   "customerId": "c-1" }`
	checkReplay(t, first, s.do(t, "POST", "/v1/orders", "reuse-create", reordered))
	checkProblem(t, s.do(t, "POST", "/v1/orders", "reuse-create", orderFor("c-2")),
		http.StatusUnprocessableEntity, "idempotency-key-reused")

	idB, _ := s.create(t, "reuse-create-b", "c-b")
	addLine := line{SKU: "sku-2", Quantity: 1, UnitPrice: 500}
	add := s.command(t, idA, "/lines", "reuse-line", addLine)

	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"same body, other order", "POST", "/v1/orders/" + idB + "/lines", addLine},
		{"other route, same order", "POST", "/v1/orders/" + idA + "/cancel", map[string]any{"reason": "reused key"}},
		{"other body, same route", "POST", "/v1/orders/" + idA + "/lines", line{SKU: "sku-2", Quantity: 2, UnitPrice: 500}},
		{"PUT", "PUT", "/v1/orders/" + idA + "/lines/sku-2", map[string]any{"quantity": 1}},
		{"create", "POST", "/v1/orders", orderFor("c-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, "reuse-line", tc.body)
			checkProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
		})
	}

	// The 422s neither ran nor replaced anything: the key still replays its own request.
	checkReplay(t, add, s.do(t, "POST", "/v1/orders/"+idA+"/lines", "reuse-line", addLine))
	if o := s.order(t, idA); o.str("status") != "created" || o.num("version") != add.num("version") {
		t.Errorf("order A: %v; want created at version %d", o, add.num("version"))
	}
	if o := s.order(t, idB); o.num("version") != 2 {
		t.Errorf("order B: %v; want version 2 (nothing added)", o)
	}
}

func TestKeysAreScopedToThePrincipal(t *testing.T) {
	t.Parallel()
	hash := func(key string) string {
		sum := sha256.Sum256([]byte(key))
		return hex.EncodeToString(sum[:])
	}
	keysHash := exec.Command(binary, "keys", "hash")
	keysHash.Stdin = strings.NewReader("alice-secret\n") // as 'echo alice-secret |' gives it
	out, err := keysHash.Output()
	if err != nil {
		t.Fatalf("api keys hash: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != hash("alice-secret") {
		t.Errorf("api keys hash < alice-secret printed %q, want %s", got, hash("alice-secret"))
	}

	keys := filepath.Join(t.TempDir(), "keys")
	file := "# principals for the end-to-end tests\n\nalice " + hash("alice-secret") + "\nbob " + hash("bob-secret") + "\n"
	if err := os.WriteFile(keys, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--keys-file", keys)
	alice := []string{"Authorization", "Bearer alice-secret"}
	bob := []string{"Authorization", "Bearer bob-secret"}

	// The same key and body from two principals: two orders.
	a := s.do(t, "POST", "/v1/orders", "shared-key", orderFor("c-shared"), alice...)
	idA := createdID(t, a)
	b := s.do(t, "POST", "/v1/orders", "shared-key", orderFor("c-shared"), bob...)
	idB := createdID(t, b)
	checkFirst(t, a)
	checkFirst(t, b)
	if idA == idB {
		t.Errorf("alice and bob both got order %s for key shared-key; want independent orders", idA)
	}
	checkReplay(t, a, s.do(t, "POST", "/v1/orders", "shared-key", orderFor("c-shared"), alice...))
	checkReplay(t, b, s.do(t, "POST", "/v1/orders", "shared-key", orderFor("c-shared"), bob...))

	// Alice's key does not bind bob's request to alice's body.
	createdID(t, s.do(t, "POST", "/v1/orders", "alice-only", orderFor("c-alice"), alice...))
	other := s.do(t, "POST", "/v1/orders", "alice-only", orderFor("c-bob"), bob...)
	createdID(t, other)
	checkFirst(t, other)

	// 401s, and they are not stored: the same key then runs for a known principal.
	checkProblem(t, s.do(t, "POST", "/v1/orders", "after-401", orderFor("c-401"), "Authorization", "Bearer mallory-secret"),
		http.StatusUnauthorized, "unauthorized")
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders", "after-401", orderFor("c-401")),
		http.StatusUnauthorized, "unauthorized")
	checkProblem(t, s.doInvalid(t, "GET", "/v1/orders/"+idA, "", nil), http.StatusUnauthorized, "unauthorized")
	fixed := s.do(t, "POST", "/v1/orders", "after-401", orderFor("c-401"), alice...)
	createdID(t, fixed)
	checkFirst(t, fixed)
}

func TestDomainRejectionIsReplayed(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "rejection-create", "c-rejection")
	s.command(t, id, "/cancel", "rejection-cancel", map[string]any{"reason": "customer changed their mind"})

	pay := map[string]any{"paymentId": "pay-1", "amount": orderTotal}
	first := s.do(t, "POST", "/v1/orders/"+id+"/payments", "rejection-pay", pay)
	checkProblem(t, first, http.StatusConflict, "invalid-transition")
	checkFirst(t, first)
	checkReplay(t, first, s.do(t, "POST", "/v1/orders/"+id+"/payments", "rejection-pay", pay))

	if evs := s.events(t, id); count(evs, "order.payment-started.v1", "", "") != 0 {
		t.Errorf("order %s has events %v; want no payment started", id, types(evs))
	}
	if o := s.order(t, id); o.str("status") != "cancelled" {
		t.Errorf("%v; want cancelled", o)
	}
}

// An expired key is a new request, but the order still recognises the key in its own events,
// so a late retry of "ship" does not ship twice.
func TestExpiredKeyCannotShipTwice(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	s := startServer(t, "", "--key-ttl", ttl.String())

	id, _ := s.create(t, "expiry-create", "c-expiry")
	s.pay(t, id, "pay-expiry")
	ship := map[string]any{"carrier": "DHL", "trackingNumber": "TRACK-1"}
	first := s.command(t, id, "/shipments", "expiry-ship", ship)

	// A probe key stored after expiry-ship: once it is forgotten, so is expiry-ship. A create
	// is the probe because a new order holds no events of the probe key.
	createdID(t, s.do(t, "POST", "/v1/orders", "expiry-probe", orderFor("c-probe-1")))
	stored := time.Now()
	deadline := stored.Add(ttl + 20*time.Second)
	for {
		r := s.do(t, "POST", "/v1/orders", "expiry-probe", orderFor("c-probe-2"))
		if r.status == http.StatusCreated {
			checkFirst(t, r)
			break
		}
		checkProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
		if t.Failed() || time.Now().After(deadline) {
			t.Fatalf("key expiry-probe still bound to its first request %v after a TTL of %v", time.Since(stored), ttl)
		}
		time.Sleep(100 * time.Millisecond) // the TTL is about time: poll it
	}

	again := s.do(t, "POST", "/v1/orders/"+id+"/shipments", "expiry-ship", ship)
	wantStatus(t, again, http.StatusOK)
	if again.str("status") != "shipped" || again.str("trackingNumber") != "TRACK-1" || again.num("version") != first.num("version") {
		t.Errorf("late retry of ship: %v; want the order shipped with TRACK-1 at version %d", again, first.num("version"))
	}
	if evs := s.events(t, id); count(evs, "order.shipped.v1", "", "") != 1 {
		t.Errorf("order %s has events %v; want exactly one order.shipped.v1", id, types(evs))
	}
}
