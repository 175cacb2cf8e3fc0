package tests

import (
	"net/http"
	"testing"
)

// Clients choose their customer ids and client references themselves: the same values from
// two clients are unrelated, and neither client's request refuses or reveals the other's
// order.

// clients are the two clients of the access tests' keys file, alice first.
var clients = []struct {
	name   string
	bearer []string
}{{"alice", alice}, {"bob", bob}}

// payBoth creates an order for each client, both for customer c-shared with client reference
// ref, and starts a payment with paymentID on each, alice's first. It returns the order ids in
// the order of clients.
func (s *server) payBoth(t *testing.T, prefix, ref, paymentID string) []string {
	t.Helper()
	var ids []string
	for _, c := range clients {
		o := orderFor("c-shared")
		o.ClientReference = ref
		id := createdID(t, s.as(t, c.bearer, "POST", "/v1/orders", prefix+"-create", o))
		s.ok(t, c.bearer, http.StatusOK, "POST", "/v1/orders/"+id+"/payments", prefix+"-start", map[string]any{"paymentId": paymentID, "amount": orderTotal})
		ids = append(ids, id)
	}
	return ids
}

// Two clients create orders for their own customer "c-shared" with the same client reference:
// both are created; a second order of either with that reference is refused as before.
func TestClientReferencesArePerClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	ids := s.payBoth(t, "same-ref", "po-shared", "pay-ref")
	for i, c := range clients {
		if o := s.ok(t, c.bearer, http.StatusOK, "GET", "/v1/orders/"+ids[i], "", nil); o.str("clientReference") != "po-shared" {
			t.Errorf("%s's order: %v; want client reference po-shared", c.name, o)
		}
		again := orderFor("c-shared")
		again.ClientReference = "po-shared"
		checkProblem(t, s.as(t, c.bearer, "POST", "/v1/orders", "same-ref-again", again), http.StatusUnprocessableEntity, "command-rejected")
	}
}
