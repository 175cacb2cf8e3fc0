package api

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acme/orders/access"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/labstack/echo/v4"
)

// public routes need no key, so they have no access rule.
var public = []string{"/healthz", "/readyz", "/openapi.yaml", "/problems/:code", "/v1/provider-events/:provider"}

func TestEveryAuthenticatedRouteHasARule(t *testing.T) {
	e := (&Server{Metrics: NewMetrics()}).Handler().(*echo.Echo)
	n := 0
	for _, r := range e.Routes() {
		if slices.Contains(public, r.Path) || !slices.Contains([]string{"GET", "POST", "PUT", "DELETE", "PATCH"}, r.Method) {
			continue
		}
		n++
		rule, ok := ruleFor(r.Method, r.Path)
		if !ok || rule.roles == 0 {
			t.Errorf("%s %s has no access rule: add it to the table in access.go", r.Method, r.Path)
		}
	}
	if n < 19 {
		t.Errorf("only %d authenticated routes; is the server's route table read right?", n)
	}
}

func TestAccessTable(t *testing.T) {
	for _, tc := range []struct {
		route    string
		roles    access.Roles
		ownOrder bool
	}{
		{"POST /v1/orders", access.RoleClient, false},
		{"POST /v1/orders/:id/cancel", access.RoleClient, false},
		{"GET /v1/orders", access.RoleClient | access.RoleAuditor | access.RoleAdmin, false},
		{"GET /v1/orders/:id", access.RoleClient | access.RoleAuditor | access.RoleAdmin, true},
		{"GET /v1/orders/:id/events", access.RoleClient | access.RoleAuditor | access.RoleAdmin, true},
		{"GET /v1/orders/:id/state", access.RoleAuditor | access.RoleAdmin, false},
		{"GET /v1/idempotency-keys/:key", access.RoleClient, false},
		{"POST /v1/payments/:paymentId/confirm", access.RoleClient, false},
		{"GET /admin/projections", access.RoleAdmin, false},
		{"GET /metrics", access.RoleAdmin, false},
	} {
		method, path, _ := strings.Cut(tc.route, " ")
		r, ok := ruleFor(method, path)
		if !ok || r.roles != tc.roles || r.ownOrder != tc.ownOrder {
			t.Errorf("%s: rule %+v (found %v), want roles %s, own order %v", tc.route, r, ok, tc.roles, tc.ownOrder)
		}
	}
	for _, route := range []string{"GET /v1/other", "PATCH /v1/orders/:id", "GET /nowhere", "GET /v1/audit/verify", "POST /admin/anything/new"} {
		method, path, _ := strings.Cut(route, " ")
		if r, ok := ruleFor(method, path); ok {
			t.Errorf("%s: rule %+v; want none, so that nobody may call it", route, r)
		}
	}
	// Auditors and admins never command. Managing webhook endpoints is not a command on an
	// order: admins may disable, enable, delete, rotate and re-send for any client.
	for route, r := range routeAccess {
		method, path, _ := strings.Cut(route, " ")
		if strings.HasPrefix(path, "/v1/webhook-endpoints/") {
			continue
		}
		if method != "GET" && strings.HasPrefix(path, "/v1/") && r.roles != access.RoleClient {
			t.Errorf("%s: roles %s; a command is the clients' alone", route, r.roles)
		}
	}
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// The document's x-roles of each operation are the access table's, and every operation that
// needs a key documents 401 and 403.
func TestTheDocumentListsEachRoutesRoles(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		route := pathParam.ReplaceAllString(path, ":$1")
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.Security != nil && len(*op.Security) == 0 {
				if _, ok := routeAccess[method+" "+route]; ok || !slices.Contains(public, route) {
					t.Errorf("%s needs no key in the document, but is not a public route of the server", name)
				}
				continue
			}
			var listed []string
			raw, _ := json.Marshal(op.Extensions["x-roles"])
			if err := json.Unmarshal(raw, &listed); err != nil || len(listed) == 0 {
				t.Errorf("%s: no x-roles", name)
				continue
			}
			documented, err := access.ParseRoles(strings.Join(listed, ","))
			if err != nil {
				t.Errorf("%s: x-roles: %v", name, err)
			}
			if r, ok := ruleFor(method, route); !ok || r.roles != documented {
				t.Errorf("%s: x-roles %v, the access table %s", name, listed, r.roles)
			}
			for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s: no %d response", name, status)
				}
			}
		}
	}
}

func TestParseAPIKeys(t *testing.T) {
	h1 := strings.Repeat("ab", 32)
	h2 := strings.Repeat("CD", 32)
	keys, err := ParseAPIKeys(strings.NewReader("# keys\n\n" +
		"shop-1 " + h1 + "\n" + // written before roles: a client
		"  ops " + h2 + " admin,auditor  \n" +
		"shop-1 " + strings.Repeat("01", 32) + " client\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		principal, hash string
		roles           access.Roles
	}{
		{"shop-1", h1, access.RoleClient},
		{"ops", strings.ToLower(h2), access.RoleAdmin | access.RoleAuditor},
		{"shop-1", strings.Repeat("01", 32), access.RoleClient},
	}
	if len(keys) != len(want) {
		t.Fatalf("%d keys, want %d: %+v", len(keys), len(want), keys)
	}
	for i, w := range want {
		k := keys[i]
		if k.Principal != w.principal || hex.EncodeToString(k.Hash[:]) != w.hash || k.Roles != w.roles {
			t.Errorf("key %d: %s %x %s, want %s %s %s", i, k.Principal, k.Hash, k.Roles, w.principal, w.hash, w.roles)
		}
	}
	if got := keys[1].Line(); got != "ops "+strings.ToLower(h2)+" auditor,admin" {
		t.Errorf("Line() = %q", got)
	}
	again, err := ParseAPIKeys(strings.NewReader(keys[1].Line()))
	if err != nil || len(again) != 1 || again[0] != keys[1] {
		t.Errorf("a line read back: %+v, %v; want %+v", again, err, keys[1])
	}

	for _, bad := range []string{
		"shop-1",
		"shop-1 " + h1 + " client extra",
		"shop-1 " + h1[:62],
		"shop-1 " + strings.Repeat("zz", 32),
		"shop-1 " + h1 + " root",
		"shop-1 " + h1 + " client,",
		"shop-1 " + h1 + "\nshop-2 " + h1,
		"shop\x01 " + h1,
	} {
		if _, err := ParseAPIKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseAPIKeys(%q) accepted it", bad)
		}
	}
}

func TestLookupFindsTheKeysEntry(t *testing.T) {
	var keys APIKeys
	for _, name := range []string{"a", "b", "c"} {
		keys = append(keys, APIKey{Principal: name, Hash: HashKey("key-" + name), Roles: access.RoleClient})
	}
	for _, name := range []string{"a", "b", "c"} {
		if k, ok := keys.lookup("key-" + name); !ok || k.Principal != name {
			t.Errorf("lookup(key-%s) = %+v, %v", name, k, ok)
		}
	}
	for _, key := range []string{"", "key-", "key-d", "KEY-A"} {
		if k, ok := keys.lookup(key); ok {
			t.Errorf("lookup(%q) = %+v; want none", key, k)
		}
	}
}

func TestRoles(t *testing.T) {
	if got := access.AllRoles.String(); got != "client,auditor,admin" {
		t.Errorf("access.AllRoles = %q", got)
	}
	rs, err := access.ParseRoles(" admin , client")
	if err != nil || rs != access.RoleAdmin|access.RoleClient || !rs.Has(access.RoleAdmin|access.RoleAuditor) || rs.Has(access.RoleAuditor) {
		t.Errorf("access.ParseRoles: %s, %v", rs, err)
	}
	if _, err := access.ParseRoles(""); err == nil {
		t.Error("access.ParseRoles(\"\") accepted no role")
	}
}

// Keys rotate while the server runs, but never to none, and a server in development mode stays
// in it.
func TestReplaceAPIKeys(t *testing.T) {
	one := APIKeys{{Principal: "shop-1", Hash: HashKey("one"), Roles: access.RoleClient}}
	two := APIKeys{{Principal: "shop-2", Hash: HashKey("two"), Roles: access.RoleClient}}
	s := &Server{APIKeys: one}
	if err := s.ReplaceAPIKeys(nil); err == nil {
		t.Error("replaced the keys by none")
	}
	if err := s.ReplaceAPIKeys(two); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.apiKeys().lookup("one"); ok {
		t.Error("the replaced key is still accepted")
	}
	if k, ok := s.apiKeys().lookup("two"); !ok || k.Principal != "shop-2" {
		t.Errorf("the new key: %+v, %v", k, ok)
	}
	dev := &Server{}
	if err := dev.ReplaceAPIKeys(two); err == nil || len(dev.apiKeys()) != 0 {
		t.Error("a server in development mode took keys")
	}
}

// lookup finds the entry of key.
func (ks APIKeys) lookup(key string) (APIKey, bool) { return ks.lookupHash(HashKey(key)) }
