package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// If-Match: * is met by any existing order, and by no missing one (RFC 9110 §13.1.1): 412,
// recorded under the key like any answer. Another client's order is a missing one.
func TestIfMatchAnyNeedsAnExistingOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := s.aliceOrder(t, "any-create")
	anyRev := []string{"If-Match", "*"}

	added := s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+id+"/lines", "any-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 5}, anyRev...)
	if added.num("version") != 3 {
		t.Errorf("%v; want the line added, version 3", added)
	}
	s.ok(t, alice, http.StatusOK, "PUT", "/v1/orders/"+id+"/lines/sku-2", "", map[string]any{"quantity": 2}, anyRev...)
	// The order exists: a missing line is the usual 404.
	checkProblem(t, s.as(t, alice, "DELETE", "/v1/orders/"+id+"/lines/none", "", nil, anyRev...), http.StatusNotFound, "not-found")

	const missing = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	first := s.as(t, alice, "POST", "/v1/orders/"+missing+"/cancel", "any-missing", map[string]any{"reason": "r"}, anyRev...)
	checkProblem(t, first, http.StatusPreconditionFailed, "precondition-failed")
	checkReplay(t, first, s.as(t, alice, "POST", "/v1/orders/"+missing+"/cancel", "any-missing", map[string]any{"reason": "r"}, anyRev...))
	checkProblem(t, s.as(t, bob, "POST", "/v1/orders/"+id+"/cancel", "any-bob", map[string]any{"reason": "r"}, anyRev...),
		http.StatusPreconditionFailed, "precondition-failed")
	checkProblem(t, s.as(t, bob, "PUT", "/v1/orders/"+id+"/lines/sku-2", "", map[string]any{"quantity": 9}, anyRev...),
		http.StatusPreconditionFailed, "precondition-failed")
	// A create's order does not exist before it.
	checkProblem(t, s.as(t, alice, "POST", "/v1/orders", "any-create-2", orderFor("c-any"), anyRev...),
		http.StatusPreconditionFailed, "precondition-failed")

	if o := s.as(t, alice, "GET", "/v1/orders/"+id, "", nil); o.num("version") != 4 || o.str("status") != "created" {
		t.Errorf("%v; want version 4, not cancelled", o)
	}
}

// If-Match compares entity tags strongly, and a list of them is met by any member (RFC 9110
// §13.1.1, §8.8.3.2): a weak tag never matches; "999", "<current>" matches, in one header or
// two. A JSON body declared in another charset than UTF-8 is refused (415), and a request
// without a key is 401 whatever the size it declares for its body.
func TestIfMatchListsAndWeakTagsAndBodies(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := s.aliceOrder(t, "lists-create")
	etag := s.as(t, alice, "GET", "/v1/orders/"+id, "", nil).header.Get("ETag")
	add := func(key string, header ...string) *response {
		return s.as(t, alice, "POST", "/v1/orders/"+id+"/lines", key, line{SKU: "sku-" + key, Quantity: 1, UnitPrice: 5}, header...)
	}
	checkProblem(t, add("weak", "If-Match", "W/"+etag), http.StatusPreconditionFailed, "precondition-failed")
	r := add("list", "If-Match", `"999", `+etag)
	wantStatus(t, r, http.StatusOK)
	etag = r.header.Get("ETag")
	wantStatus(t, add("two", "If-Match", `"999"`, "If-Match", etag), http.StatusOK)
	checkProblem(t, add("none", "If-Match", `"999", W/"1", "x"`), http.StatusPreconditionFailed, "precondition-failed")
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders/"+id+"/lines", "bad", line{SKU: "sku-bad", Quantity: 1, UnitPrice: 5},
		append(slices.Clone(alice), "If-Match", `"1" garbage`)...), http.StatusBadRequest, "malformed-request")

	latin := s.doInvalid(t, "POST", "/v1/orders", "latin", orderFor("c-latin"), append(slices.Clone(alice), "Content-Type", "application/json; charset=iso-8859-1")...)
	checkProblem(t, latin, http.StatusUnsupportedMediaType, "unsupported-media-type")

	big := strings.Repeat("x", 2<<20)
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders", "big", json.RawMessage(`"`+big+`"`)), http.StatusUnauthorized, "unauthorized")
	checkProblem(t, s.doInvalid(t, "POST", "/v1/orders", "big", json.RawMessage(`"`+big+`"`), alice...), http.StatusRequestEntityTooLarge, "payload-too-large")
}

// An order's ETag is its version, the number its answer's "version" says: "v2" for an order
// of two events. A client that kept a tag of the form before ("1", the stream revision of the
// same order) is still matched by it, and "v0", which no order has, matches none.
func TestETagIsTheVersion(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := s.aliceOrder(t, "version-create")
	got := s.as(t, alice, "GET", "/v1/orders/"+id, "", nil)
	if tag, v := got.header.Get("ETag"), got.num("version"); tag != fmt.Sprintf(`"v%d"`, v) {
		t.Fatalf("ETag %s beside version %d", tag, v)
	}
	v := got.num("version")
	add := func(key, ifMatch string) *response {
		return s.as(t, alice, "POST", "/v1/orders/"+id+"/lines", key, line{SKU: "sku-" + key, Quantity: 1, UnitPrice: 5}, "If-Match", ifMatch)
	}
	r := add("old-form", fmt.Sprintf(`"%d"`, v-1))
	wantStatus(t, r, http.StatusOK)
	if tag := r.header.Get("ETag"); tag != fmt.Sprintf(`"v%d"`, v+1) || r.num("version") != v+1 {
		t.Errorf("after the command: ETag %s beside version %d", tag, r.num("version"))
	}
	checkProblem(t, add("old-stale", fmt.Sprintf(`"%d"`, v-1)), http.StatusPreconditionFailed, "precondition-failed")
	checkProblem(t, add("v0", `"v0"`), http.StatusPreconditionFailed, "precondition-failed")
	checkProblem(t, add("v-padded", fmt.Sprintf(`"v0%d"`, v+1)), http.StatusPreconditionFailed, "precondition-failed")
	wantStatus(t, add("new-form", fmt.Sprintf(`"v%d"`, v+1)), http.StatusOK)
}
