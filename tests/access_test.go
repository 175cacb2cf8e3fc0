package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The principals of the access tests, their bearer keys and the roles in the keys file.
var (
	alice  = []string{"Authorization", "Bearer alice-access-secret"}  // client
	bob    = []string{"Authorization", "Bearer bob-access-secret"}    // client
	audrey = []string{"Authorization", "Bearer audrey-access-secret"} // auditor
	adam   = []string{"Authorization", "Bearer adam-access-secret"}   // admin
)

// accessKeysFile writes the keys file of the access tests: a line without roles (a client, as
// in keys files from before roles), and lines with them.
func accessKeysFile(t *testing.T) string {
	t.Helper()
	hash := func(bearer []string) string {
		sum := sha256.Sum256([]byte(strings.TrimPrefix(bearer[1], "Bearer ")))
		return hex.EncodeToString(sum[:])
	}
	file := "# access tests\n" +
		"alice " + hash(alice) + "\n" +
		"bob " + hash(bob) + " client\n" +
		"audrey " + hash(audrey) + " auditor\n" +
		"adam " + hash(adam) + " admin\n"
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// as sends a request with the caller's Authorization.
func (s *server) as(t testing.TB, caller []string, method, path, key string, body any, header ...string) *response {
	t.Helper()
	return s.do(t, method, path, key, body, append(slices.Clone(caller), header...)...)
}

// ok sends a request as caller and expects status.
func (s *server) ok(t testing.TB, caller []string, status int, method, path, key string, body any, header ...string) *response {
	t.Helper()
	r := s.as(t, caller, method, path, key, body, header...)
	wantStatus(t, r, status)
	return r
}

// order states the rows of the route × role table start from, each made by alice.
func (s *server) aliceOrder(t testing.TB, key string) string {
	t.Helper()
	return createdID(t, s.as(t, alice, "POST", "/v1/orders", key, orderFor("c-"+key)))
}

func (s *server) alicePaying(t testing.TB, key, paymentID string) string {
	t.Helper()
	id := s.aliceOrder(t, key)
	s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/payments", key+"-start", map[string]any{"paymentId": paymentID, "amount": orderTotal})
	return id
}

func (s *server) alicePaid(t testing.TB, key, paymentID string) string {
	t.Helper()
	id := s.alicePaying(t, key, paymentID)
	s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/payments/"+paymentID+"/confirm", key+"-confirm", map[string]any{"amount": orderTotal})
	return id
}

// accessRow is a route of the table: setup makes, as alice, what the request needs.
type accessRow struct {
	route  string
	setup  func(t *testing.T, s *server) request
	status int      // the answer to an allowed caller
	allow  []string // the callers allowed: alice, bob (clients), audrey (auditor), adam (admin)
	// hidden: bob, a client allowed on the route, gets 404 because the order, payment or key
	// is alice's.
	hidden bool
}

var clientsOnly = []string{"alice", "bob"}
var everyone = []string{"alice", "bob", "audrey", "adam"}

func accessRows() []accessRow {
	order := func(sub string, method string, body any) func(*testing.T, *server) request {
		return func(t *testing.T, s *server) request {
			id := s.aliceOrder(t, "row"+strings.ReplaceAll(sub, "/", "-")+method)
			return request{method: method, path: "/v1/orders/" + id + sub, body: body}
		}
	}
	return []accessRow{
		{route: "POST /v1/orders", status: 201, allow: clientsOnly, setup: func(*testing.T, *server) request {
			return request{method: "POST", path: "/v1/orders", body: orderFor("c-row-create")}
		}},
		{route: "GET /v1/orders", status: 200, allow: everyone, setup: func(*testing.T, *server) request {
			return request{method: "GET", path: "/v1/orders"}
		}},
		{route: "GET /v1/orders/{id}", status: 200, allow: everyone, hidden: true, setup: order("", "GET", nil)},
		{route: "GET /v1/orders/{id}/events", status: 200, allow: everyone, hidden: true, setup: order("/events", "GET", nil)},
		{route: "GET /v1/orders/{id}/state", status: 200, allow: []string{"audrey", "adam"}, setup: func(t *testing.T, s *server) request {
			id := s.aliceOrder(t, "row-state")
			return request{method: "GET", path: "/v1/orders/" + id + "/state?revision=0"}
		}},
		{route: "POST /v1/orders/{id}/lines", status: 200, allow: clientsOnly, hidden: true,
			setup: order("/lines", "POST", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})},
		{route: "PUT /v1/orders/{id}/lines/{sku}", status: 200, allow: clientsOnly, hidden: true,
			setup: order("/lines/sku-1", "PUT", map[string]any{"quantity": 3})},
		{route: "DELETE /v1/orders/{id}/lines/{sku}", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.aliceOrder(t, "row-delete")
			s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/lines", "row-delete-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
			return request{method: "DELETE", path: "/v1/orders/" + id + "/lines/sku-2"}
		}},
		{route: "POST /v1/orders/{id}/payments", status: 200, allow: clientsOnly, hidden: true,
			setup: order("/payments", "POST", map[string]any{"paymentId": "pay-row-start", "amount": orderTotal})},
		{route: "POST /v1/orders/{id}/payments/{paymentId}/confirm", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.alicePaying(t, "row-confirm", "pay-row-confirm")
			return request{method: "POST", path: "/v1/orders/" + id + "/payments/pay-row-confirm/confirm", body: map[string]any{"amount": orderTotal}}
		}},
		{route: "POST /v1/orders/{id}/payments/{paymentId}/fail", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.alicePaying(t, "row-fail", "pay-row-fail")
			return request{method: "POST", path: "/v1/orders/" + id + "/payments/pay-row-fail/fail", body: map[string]any{"reason": "declined"}}
		}},
		{route: "POST /v1/orders/{id}/cancel", status: 200, allow: clientsOnly, hidden: true,
			setup: order("/cancel", "POST", map[string]any{"reason": "changed my mind"})},
		{route: "POST /v1/orders/{id}/shipments", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.alicePaid(t, "row-ship", "pay-row-ship")
			return request{method: "POST", path: "/v1/orders/" + id + "/shipments", body: map[string]any{"carrier": "DHL", "trackingNumber": "T-1"}}
		}},
		{route: "POST /v1/orders/{id}/refunds", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.alicePaid(t, "row-refund", "pay-row-refund")
			return request{method: "POST", path: "/v1/orders/" + id + "/refunds", body: map[string]any{"refundId": "r-1", "amount": orderTotal}}
		}},
		{route: "POST /v1/orders/{id}/refunds/{refundId}/complete", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			id := s.alicePaid(t, "row-complete", "pay-row-complete")
			s.ok(t, alice, 200, "POST", "/v1/orders/"+id+"/refunds", "row-complete-refund", map[string]any{"refundId": "r-1", "amount": orderTotal})
			return request{method: "POST", path: "/v1/orders/" + id + "/refunds/r-1/complete", body: map[string]any{}}
		}},
		{route: "POST /v1/payments/{paymentId}/confirm", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			s.alicePaying(t, "row-callback", "pay-row-callback")
			return request{method: "POST", path: "/v1/payments/pay-row-callback/confirm", body: map[string]any{"amount": orderTotal}}
		}},
		{route: "GET /v1/idempotency-keys/{key}", status: 200, allow: clientsOnly, hidden: true, setup: func(t *testing.T, s *server) request {
			s.aliceOrder(t, "row-key")
			return request{method: "GET", path: "/v1/idempotency-keys/row-key"}
		}},
		{route: "GET /v1/reports/sales", status: 200, allow: []string{"audrey", "adam"}, setup: func(*testing.T, *server) request {
			return request{method: "GET", path: "/v1/reports/sales?from=2026-01-01&to=2026-12-31"}
		}},
		{route: "GET /admin/projections", status: 200, allow: []string{"adam"}, setup: func(*testing.T, *server) request {
			return request{method: "GET", path: "/admin/projections"}
		}},
		{route: "POST /admin/projections/{name}/rebuild", status: 202, allow: []string{"adam"}, setup: func(*testing.T, *server) request {
			return request{method: "POST", path: "/admin/projections/lookups/rebuild"}
		}},
		{route: "GET /metrics", status: 200, allow: []string{"adam"}, setup: func(*testing.T, *server) request {
			return request{method: "GET", path: "/metrics"}
		}},
	}
}

// Every route × every role: 401 without a known key, 403 for a role the route does not allow,
// 404 for a client on another's order, payment or key, and the route's answer otherwise. The
// callers that are refused go first, so the allowed one meets the state setup made.
func TestRouteRoleTable(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	callers := map[string][]string{"alice": alice, "bob": bob, "audrey": audrey, "adam": adam}
	for _, row := range accessRows() {
		t.Run(row.route, func(t *testing.T) {
			req := row.setup(t, s)
			key := func(who string) string {
				if req.method == "POST" && !strings.HasPrefix(req.path, "/admin/") {
					return "table " + row.route + " " + who
				}
				return ""
			}
			checkProblem(t, s.doInvalid(t, req.method, req.path, key("nobody"), req.body), 401, "unauthorized")
			checkProblem(t, s.do(t, req.method, req.path, key("mallory"), req.body, "Authorization", "Bearer mallory-secret"), 401, "unauthorized")
			order := []string{"audrey", "adam", "bob", "alice"}
			if row.route == "GET /admin/projections" || row.route == "POST /admin/projections/{name}/rebuild" || row.route == "GET /metrics" {
				order = []string{"alice", "bob", "audrey", "adam"}
			}
			for _, who := range order {
				r := s.as(t, callers[who], req.method, req.path, key(who), req.body)
				switch {
				case !slices.Contains(row.allow, who):
					checkProblem(t, r, 403, "forbidden")
				case who == "bob" && row.hidden:
					checkProblem(t, r, 404, "not-found")
				default:
					wantStatus(t, r, row.status)
				}
			}
		})
	}
}

// A client sees only its own orders, their events and its own keys; another client's order,
// payment or key is answered exactly as one that does not exist, for reads and commands alike.
func TestClientsAreIsolated(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	const missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV" // no such order
	a := createdID(t, s.as(t, alice, "POST", "/v1/orders", "iso-create", orderFor("c-alice")))
	s.ok(t, alice, 200, "POST", "/v1/orders/"+a+"/payments", "iso-start", map[string]any{"paymentId": "pay-iso-a", "amount": orderTotal})
	b := createdID(t, s.as(t, bob, "POST", "/v1/orders", "iso-create", orderFor("c-bob")))

	// Listings: each client its own, whatever the filter; the auditor all.
	listed := func(caller []string, query string) []string {
		t.Helper()
		r := s.ok(t, caller, 200, "GET", "/v1/orders"+query, "", nil)
		var ids []string
		for _, o := range r.json["orders"].([]any) {
			ids = append(ids, o.(map[string]any)["id"].(string))
		}
		return ids
	}
	for _, c := range []struct {
		who    string
		caller []string
		query  string
		want   []string
	}{
		{"alice", alice, "", []string{a}},
		{"bob", bob, "", []string{b}},
		{"alice", alice, "?customerId=c-bob", nil},
		{"bob", bob, "?status=paying", nil},
		{"audrey", audrey, "", []string{b, a}},
		{"adam", adam, "?customerId=c-bob", []string{b}},
	} {
		if got := listed(c.caller, c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s lists %v with %q; want %v", c.who, got, c.query, c.want)
		}
	}

	// Reads of alice's order by bob are those of an order that does not exist.
	same := func(what string, foreign, absent *response, foreignID, absentID string) {
		t.Helper()
		f := strings.ReplaceAll(string(foreign.body), foreignID, "ID")
		m := strings.ReplaceAll(string(absent.body), absentID, "ID")
		if foreign.status != absent.status || f != m || foreign.replayed() != absent.replayed() {
			t.Errorf("%s: another's answered %v\nmissing answered %v\nwant the same", what, foreign, absent)
		}
	}
	for _, sub := range []string{"", "/events"} {
		foreign := s.as(t, bob, "GET", "/v1/orders/"+a+sub, "", nil)
		checkProblem(t, foreign, 404, "not-found")
		same("GET order"+sub, foreign, s.as(t, bob, "GET", "/v1/orders/"+missing+sub, "", nil), a, missing)
	}

	// Commands too, with their keys (the answer is stored and replayed, as for a missing
	// order) and with If-Match.
	add := line{SKU: "sku-bob", Quantity: 1, UnitPrice: 1}
	foreign := s.as(t, bob, "POST", "/v1/orders/"+a+"/lines", "iso-add", add)
	checkProblem(t, foreign, 404, "not-found")
	same("add line", foreign, s.as(t, bob, "POST", "/v1/orders/"+missing+"/lines", "iso-add-missing", add), a, missing)
	same("add line retried", s.as(t, bob, "POST", "/v1/orders/"+a+"/lines", "iso-add", add),
		s.as(t, bob, "POST", "/v1/orders/"+missing+"/lines", "iso-add-missing", add), a, missing)
	foreign = s.as(t, bob, "POST", "/v1/orders/"+a+"/cancel", "iso-cancel", map[string]any{"reason": "mine now"}, "If-Match", `"0"`)
	checkProblem(t, foreign, 412, "precondition-failed")
	same("cancel with If-Match", foreign,
		s.as(t, bob, "POST", "/v1/orders/"+missing+"/cancel", "iso-cancel-missing", map[string]any{"reason": "mine now"}, "If-Match", `"0"`), a, missing)
	foreign = s.as(t, bob, "POST", "/v1/payments/pay-iso-a/confirm", "iso-callback", map[string]any{"amount": orderTotal})
	checkProblem(t, foreign, 404, "not-found")
	same("payment callback", foreign,
		s.as(t, bob, "POST", "/v1/payments/pay-iso-none/confirm", "iso-callback-missing", map[string]any{"amount": orderTotal}), "pay-iso-a", "pay-iso-none")

	// Nothing bob sent touched alice's order.
	if o := s.ok(t, alice, 200, "GET", "/v1/orders/"+a, "", nil); o.str("status") != "paying" || o.num("version") != 3 {
		t.Errorf("alice's order after bob's attempts: %v; want paying at version 3", o)
	}
	evs, _ := s.ok(t, alice, 200, "GET", "/v1/orders/"+a+"/events", "", nil).json["events"].([]any)
	if len(evs) != 3 {
		t.Errorf("alice's order has %d events; want 3", len(evs))
	}
	for _, e := range evs {
		if md, _ := e.(map[string]any)["metadata"].(map[string]any); md["principal"] != "alice" {
			t.Errorf("an event of alice's order has metadata %v; want principal alice", md)
		}
	}

	// Keys: the same key names two requests, one per client; neither sees the other's.
	if k := s.ok(t, alice, 200, "GET", "/v1/idempotency-keys/iso-create", "", nil); k.str("orderId") != a {
		t.Errorf("alice's key iso-create: %v; want it bound to %s", k, a)
	}
	if k := s.ok(t, bob, 200, "GET", "/v1/idempotency-keys/iso-create", "", nil); k.str("orderId") != b {
		t.Errorf("bob's key iso-create: %v; want it bound to %s", k, b)
	}
	checkProblem(t, s.as(t, bob, "GET", "/v1/idempotency-keys/iso-start", "", nil), 404, "not-found")
	checkProblem(t, s.as(t, audrey, "GET", "/v1/idempotency-keys/iso-start", "", nil), 403, "forbidden")

	// The auditor reads any order, and commands none.
	if o := s.ok(t, audrey, 200, "GET", "/v1/orders/"+a, "", nil); o.str("id") != a {
		t.Errorf("audrey reads %v; want order %s", o, a)
	}
	checkProblem(t, s.as(t, audrey, "POST", "/v1/orders/"+a+"/cancel", "iso-audrey", map[string]any{"reason": "audit"}), 403, "forbidden")

	// Keys never reach the logs, bearer or idempotency.
	logs := s.current().stderr.String()
	for _, secret := range []string{alice[1], bob[1], audrey[1], adam[1], "-access-secret", "iso-create", "iso-add"} {
		secret = strings.TrimPrefix(secret, "Bearer ")
		if strings.Contains(logs, secret) {
			t.Errorf("the server's logs contain %q", secret)
		}
	}
}

// keysAdd runs 'api keys add' and returns the key it printed.
func keysAdd(t *testing.T, file, name string, roles ...string) string {
	t.Helper()
	args := []string{"keys", "add", name, "--keys-file", file}
	for _, r := range roles {
		args = append(args, "--role", r)
	}
	out, err := runBinary(args...)
	if err != nil {
		t.Fatalf("api %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out)
}

// 'api keys add' prints a new key once and appends only its hash and roles: the server then
// accepts the key with those roles.
func TestKeysAdd(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	shop := keysAdd(t, file, "shop-1")
	ops := keysAdd(t, file, "ops", "admin", "auditor")
	both := keysAdd(t, file, "backoffice", "client,auditor")
	if shop == ops || len(shop) < 20 {
		t.Fatalf("keys %q and %q; want two long random keys", shop, ops)
	}
	content, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode %v; want 0600", st.Mode().Perm())
	}
	for _, key := range []string{shop, ops, both} {
		sum := sha256.Sum256([]byte(key))
		if strings.Contains(string(content), key) || !strings.Contains(string(content), hex.EncodeToString(sum[:])) {
			t.Errorf("keys file:\n%s\nwant the hash of %q and not the key", content, key)
		}
	}
	if _, err := runBinary("keys", "add", "x", "--role", "root", "--keys-file", file); err == nil {
		t.Error("keys add --role root succeeded")
	}

	s := startServer(t, "", "--keys-file", file)
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	id := createdID(t, s.as(t, bearer(shop), "POST", "/v1/orders", "added", orderFor("c-added")))
	checkProblem(t, s.as(t, bearer(shop), "GET", "/admin/projections", "", nil), 403, "forbidden")
	s.ok(t, bearer(ops), 200, "GET", "/admin/projections", "", nil)
	s.ok(t, bearer(ops), 200, "GET", "/v1/orders/"+id, "", nil)
	checkProblem(t, s.as(t, bearer(ops), "POST", "/v1/orders", "ops-create", orderFor("c-ops")), 403, "forbidden")
	// client and auditor: commands its own orders, reads everyone's.
	s.ok(t, bearer(both), 200, "GET", "/v1/orders/"+id, "", nil)
	checkProblem(t, s.as(t, bearer(both), "POST", "/v1/orders/"+id+"/cancel", "both-cancel", map[string]any{"reason": "x"}), 404, "not-found")
	createdID(t, s.as(t, bearer(both), "POST", "/v1/orders", "both-create", orderFor("c-both")))
}

// runBinary runs the built binary with args and returns its stdout.
func runBinary(args ...string) (string, error) {
	var stderr strings.Builder
	cmd := exec.Command(binary, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// Keys rotate without a restart: on SIGHUP the server takes the keys file as it is then; a file
// it cannot use leaves the keys in use, and says so in the log.
func TestKeysReloadOnHangup(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	first := keysAdd(t, file, "shop-1")
	s := startServer(t, "", "--keys-file", file)
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	second := keysAdd(t, file, "shop-2")
	checkProblem(t, s.as(t, bearer(second), "GET", "/v1/orders", "", nil), 401, "unauthorized")

	s.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for s.as(t, bearer(second), "GET", "/v1/orders", "", nil).status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the key added before SIGHUP is still refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.ok(t, bearer(first), 200, "GET", "/v1/orders", "", nil)

	if err := os.WriteFile(file, []byte("not a keys line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.signal(t, syscall.SIGHUP)
	for !strings.Contains(s.current().stderr.String(), "keys file not reloaded") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("no log line for a keys file that could not be used")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.ok(t, bearer(second), 200, "GET", "/v1/orders", "", nil)
	s.ok(t, bearer(first), 200, "GET", "/v1/orders", "", nil)
}
