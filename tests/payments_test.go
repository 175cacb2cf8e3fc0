package tests

import (
	"fmt"
	"net/http"
	"testing"
)

// A provider's callback by payment id must find the order the money was for: a payment id
// belongs to one order of its client. A second order of the client cannot start it; the
// callback pays the first; another client's payment with the same id is its own.
func TestPaymentIDBelongsToOneOrderOfAClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	start := map[string]any{"paymentId": "pay-one", "amount": orderTotal}
	first := s.aliceOrder(t, "one-first")
	second := s.aliceOrder(t, "one-second")
	started := s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+first+"/payments", "one-start-first", start)

	refused := s.as(t, alice, "POST", "/v1/orders/"+second+"/payments", "one-start-second", start)
	checkProblem(t, refused, http.StatusUnprocessableEntity, "payment-id-taken")
	checkReplay(t, refused, s.as(t, alice, "POST", "/v1/orders/"+second+"/payments", "one-start-second", start))
	checkReplay(t, started, s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+first+"/payments", "one-start-first", start))
	if again := s.ok(t, alice, http.StatusOK, "POST", "/v1/orders/"+first+"/payments", "one-start-again", start); again.str("status") != "paying" {
		t.Errorf("the start sent again with another key: %v; want the order paying", again)
	}

	bobs := createdID(t, s.as(t, bob, "POST", "/v1/orders", "one-bob", orderFor("c-bob")))
	s.ok(t, bob, http.StatusOK, "POST", "/v1/orders/"+bobs+"/payments", "one-start-bob", start)

	for _, c := range []struct {
		caller []string
		order  string
	}{{alice, first}, {bob, bobs}} {
		r := s.ok(t, c.caller, http.StatusOK, "POST", "/v1/payments/pay-one/confirm", "one-callback", map[string]any{"amount": orderTotal})
		if r.str("id") != c.order || r.str("status") != "paid" {
			t.Errorf("callback for pay-one: %v; want order %s paid", r, c.order)
		}
	}
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+second, "", nil); o.str("status") != "created" || o.str("paymentId") != "" {
		t.Errorf("the refused order: %v; want created, without a payment", o)
	}
}

// An order records every duplicate charge, however many, but its answers list the first 100,
// with how many there are, their total, and where to find them all.
func TestManyDuplicateChargesAreShownBounded(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "dups-create", "c-dups")
	s.pay(t, id, "pay-dups")
	const charges, shown = 105, 100
	for i := range charges {
		r := s.do(t, "POST", fmt.Sprintf("/v1/orders/%s/payments/dup-%03d/confirm", id, i), fmt.Sprint("dup-", i), map[string]any{"amount": orderTotal})
		checkProblem(t, r, http.StatusUnprocessableEntity, "command-rejected")
		if i == 0 {
			checkCharges(t, s.order(t, id), 1, 1, "")
		}
	}
	checkCharges(t, s.order(t, id), shown, charges, "/v1/orders/"+id+"/events")
	shipped := s.command(t, id, "/shipments", "dups-ship", map[string]any{"carrier": "DHL", "trackingNumber": "TRK-DUPS"})
	checkCharges(t, shipped, shown, charges, "/v1/orders/"+id+"/events")
	if n := count(s.events(t, id), "order.duplicate-charge-recorded.v1", "", ""); n != charges {
		t.Errorf("%d duplicate charges in the order's events, want %d", n, charges)
	}
}

// checkCharges checks an order's duplicate charges as its answer r shows them: the first
// listed of the n recorded, their total, and the link to the rest.
func checkCharges(t *testing.T, r *response, listed, n int, rest string) {
	t.Helper()
	dups, _ := r.json["duplicateCharges"].([]any)
	if len(dups) != listed || r.num("duplicateChargeCount") != int64(n) || r.num("duplicateChargeTotal") != int64(n)*orderTotal ||
		r.str("duplicateChargeEvents") != rest {
		t.Fatalf("%d charges listed, count %d, total %d, rest at %q; want %d, %d, %d, %q", len(dups),
			r.num("duplicateChargeCount"), r.num("duplicateChargeTotal"), r.str("duplicateChargeEvents"), listed, n, int64(n)*orderTotal, rest)
	}
	if first, _ := dups[0].(map[string]any); first["paymentId"] != "dup-000" {
		t.Errorf("first charge listed %v; want dup-000, the oldest", first)
	}
}
