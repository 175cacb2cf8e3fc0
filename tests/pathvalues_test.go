package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// awkward are ids with every character that a path must escape or that escaping may leave
// as it is: each must come back byte for byte, however the client wrote it in the path.
// "a%41" is there to catch a second decoding (it would become "aA").
var awkward = []string{"ch_1+AbC=", "a/b", "100%", "a%41", "é", "支付"}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does: every byte but
// A–Z a–z 0–9 - _ . ! ~ * ' ( ).
func encodeURIComponent(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// escapings are the ways a client may write s as one path segment, all equivalent by RFC
// 3986: as JavaScript does, as Go does (which leaves '+' and '=' as they are), and with every
// byte escaped in lower-case hex.
func escapings(s string) []string {
	var lower strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&lower, "%%%02x", c)
	}
	return []string{encodeURIComponent(s), url.PathEscape(s), lower.String()}
}

// Payment and refund ids in paths are the ids the bodies named, decoded once: a payment
// started as "ch_1+AbC=" and confirmed at .../payments/ch_1%2BAbC%3D/confirm is that payment,
// not a duplicate charge. A retry with the id written another way is the same request.
func TestPaymentIDsInPathsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	body := map[string]any{"amount": orderTotal}
	for i, v := range awkward {
		t.Run(encodeURIComponent(v), func(t *testing.T) {
			esc := escapings(v)
			id, _ := s.create(t, fmt.Sprintf("pv-create-%d", i), "c-pv")
			s.command(t, id, "/payments", fmt.Sprintf("pv-start-%d", i), map[string]any{"paymentId": v, "amount": orderTotal})
			confirmKey := fmt.Sprintf("pv-confirm-%d", i)
			confirmed := s.do(t, "POST", "/v1/orders/"+id+"/payments/"+esc[0]+"/confirm", confirmKey, body)
			wantStatus(t, confirmed, http.StatusOK)
			if confirmed.str("status") != "paid" || confirmed.str("paymentId") != v || confirmed.json["duplicateCharges"] != nil {
				t.Errorf("%v; want the order paid by %q, no duplicate charge", confirmed, v)
			}
			for _, e := range esc[1:] {
				checkReplay(t, confirmed, s.do(t, "POST", "/v1/orders/"+id+"/payments/"+e+"/confirm", confirmKey, body))
			}

			refundID := "r-" + v
			s.command(t, id, "/refunds", fmt.Sprintf("pv-refund-%d", i), map[string]any{"refundId": refundID, "amount": orderTotal})
			done := s.command(t, id, "/refunds/"+escapings(refundID)[0]+"/complete", fmt.Sprintf("pv-refunded-%d", i), map[string]any{})
			if done.str("status") != "refunded" || done.str("refundId") != refundID {
				t.Errorf("%v; want the order refunded by %q", done, refundID)
			}

			// The provider's callback, which knows only its payment id.
			byID := v + "-cb"
			idB, _ := s.create(t, fmt.Sprintf("pv-create-b-%d", i), "c-pv")
			s.command(t, idB, "/payments", fmt.Sprintf("pv-start-b-%d", i), map[string]any{"paymentId": byID, "amount": orderTotal})
			cb := s.do(t, "POST", "/v1/payments/"+escapings(byID)[0]+"/confirm", fmt.Sprintf("pv-cb-%d", i), body)
			wantStatus(t, cb, http.StatusOK)
			if cb.str("id") != idB || cb.str("status") != "paid" || cb.str("paymentId") != byID {
				t.Errorf("%v; want order %s paid by %q", cb, idB, byID)
			}

			failed := v + "-f"
			idC, _ := s.create(t, fmt.Sprintf("pv-create-c-%d", i), "c-pv")
			s.command(t, idC, "/payments", fmt.Sprintf("pv-start-c-%d", i), map[string]any{"paymentId": failed, "amount": orderTotal})
			f := s.command(t, idC, "/payments/"+escapings(failed)[2]+"/fail", fmt.Sprintf("pv-fail-%d", i), map[string]any{"reason": "declined"})
			if f.str("status") != "created" {
				t.Errorf("%v; want payment %q failed, the order back to created", f, failed)
			}
			if n := count(s.events(t, idC), "order.payment-failed.v1", "paymentId", failed); n != 1 {
				t.Errorf("order %s: %d payment-failed events for %q; want 1", idC, n, failed)
			}
		})
	}
}

// A SKU in a path is the SKU of the line, decoded once: a SKU with '/' can be changed and
// removed like any other.
func TestSKUsInPathsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	o := orderFor("c-sku")
	for _, v := range awkward {
		o.Lines = append(o.Lines, line{SKU: v, Quantity: 1, UnitPrice: 100})
	}
	id := createdID(t, s.do(t, "POST", "/v1/orders", "sku-create", o))
	for i, v := range awkward {
		esc := escapings(v)
		put := s.do(t, "PUT", "/v1/orders/"+id+"/lines/"+esc[0], fmt.Sprintf("sku-put-%d", i), map[string]any{"quantity": 3})
		wantStatus(t, put, http.StatusOK)
		if q := lineQuantity(put, v); q != 3 {
			t.Errorf("%v: line %q has quantity %d; want 3", put, v, q)
		}
		// The same change with the SKU written another way is a retry of it.
		for _, e := range esc[1:] {
			checkReplay(t, put, s.do(t, "PUT", "/v1/orders/"+id+"/lines/"+e, fmt.Sprintf("sku-put-%d", i), map[string]any{"quantity": 3}))
		}
		del := s.do(t, "DELETE", "/v1/orders/"+id+"/lines/"+esc[2], "", nil)
		wantStatus(t, del, http.StatusOK)
		if q := lineQuantity(del, v); q != -1 {
			t.Errorf("%v: line %q still there; want it removed", del, v)
		}
	}
	// A space is decoded too, and the domain refuses it in a SKU, by name; "a%2520b" is the
	// SKU "a%20b", which the order does not have.
	r := s.do(t, "PUT", "/v1/orders/"+id+"/lines/a%20b", "", map[string]any{"quantity": 3})
	checkProblem(t, r, http.StatusBadRequest, "invalid-command")
	if !strings.Contains(r.str("detail"), `"a b"`) {
		t.Errorf("%v; want the detail to name the SKU \"a b\"", r)
	}
	r = s.do(t, "PUT", "/v1/orders/"+id+"/lines/a%2520b", "", map[string]any{"quantity": 3})
	checkProblem(t, r, http.StatusNotFound, "not-found")
	if !strings.HasSuffix(r.str("detail"), "sku a%20b") {
		t.Errorf("%v; want the detail to name the SKU a%%20b", r)
	}
}

// lineQuantity is the quantity of the line sku in the order r answered, -1 if it has none.
func lineQuantity(r *response, sku string) int64 {
	lines, _ := r.json["lines"].([]any)
	for _, l := range lines {
		if m, _ := l.(map[string]any); m["sku"] == sku {
			return jsonInt(m["quantity"])
		}
	}
	return -1
}

// An idempotency key in GET /v1/idempotency-keys/{key} is decoded once: "100%25" is the key
// "100%", and "a%2541" the key "a%41", not "aA".
func TestIdempotencyKeysInPathsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	keys := []string{"100%", "a%41", "aA", "k/1", "k+1=", "sp ace", "q?x#y"}
	orders := map[string]string{}
	for _, k := range keys {
		orders[k] = createdID(t, s.do(t, "POST", "/v1/orders", k, orderFor("c-keys")))
	}
	for _, k := range keys {
		for _, e := range escapings(k) {
			r := s.do(t, "GET", "/v1/idempotency-keys/"+e, "", nil)
			if r.status != http.StatusOK {
				t.Errorf("key %q as %q: %v; want 200", k, e, r)
				continue
			}
			checkKey(t, keyOf(t, r), k, "POST", "/v1/orders", orders[k], http.StatusCreated)
		}
	}
}

// An order id may be escaped too, and is the same order: to its owner only.
func TestOrderIDsInPathsAreDecodedOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	id := s.aliceOrder(t, "oid-create")
	escaped := fmt.Sprintf("%%%02X", id[0]) + id[1:]
	got := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+escaped, "", nil)
	if got.str("id") != id {
		t.Errorf("%v; want order %s", got, id)
	}
	added := s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+escaped+"/lines", "oid-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 5})
	if added.str("id") != id {
		t.Errorf("%v; want order %s", added, id)
	}
	checkReplay(t, added, s.as(t, alice, "POST", "/v1/orders/"+id+"/lines", "oid-add", line{SKU: "sku-2", Quantity: 1, UnitPrice: 5}))
	for _, path := range []string{"/v1/orders/" + escaped, "/v1/orders/" + escaped + "/events"} {
		checkProblem(t, s.as(t, bob, "GET", path, "", nil), http.StatusNotFound, "not-found")
	}
	checkProblem(t, s.as(t, bob, "POST", "/v1/orders/"+escaped+"/cancel", "oid-bob", map[string]any{"reason": "mine"}),
		http.StatusNotFound, "not-found")
}
