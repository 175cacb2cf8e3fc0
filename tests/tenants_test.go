package tests

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/acme/orders/eventstore/sqlite"
)

// Clients choose their payment ids, customer ids and client references themselves: the same
// values from two clients are unrelated, and neither client's request reaches, refuses or
// reveals the other's order.

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

// confirmsOwn checks that each client's callback for paymentID confirms its own order, ids[i]
// for clients[i].
func (s *server) confirmsOwn(t *testing.T, key, paymentID string, ids []string) {
	t.Helper()
	for i, c := range clients {
		r := s.as(t, c.bearer, "POST", "/v1/payments/"+paymentID+"/confirm", key, map[string]any{"amount": orderTotal})
		wantStatus(t, r, http.StatusOK)
		if r.str("id") != ids[i] || r.str("status") != "paid" {
			t.Errorf("%s's callback for %s: %v; want the order %s paid", c.name, paymentID, r, ids[i])
		}
	}
}

// Two clients start payments with the same payment id: each one's callback confirms its own
// order, though bob's payment came last.
func TestPaymentIDsArePerClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	ids := s.payBoth(t, "same-pay", "", "pay-same")
	s.confirmsOwn(t, "same-pay-callback", "pay-same", ids)
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

// A data directory whose lookups read model was written before it was per principal (the
// version 1 tables, and a checkpoint table without versions) is rebuilt when the server starts:
// afterwards each client's callback finds its own order, which version 1 could not tell apart.
func TestUpgradeRebuildsOldLookups(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t))
	ids := s.payBoth(t, "upgrade", "po-upgrade", "pay-upgrade")
	s.current().stop(t)

	db, err := sqlite.OpenDB(filepath.Join(s.dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`
		DROP VIEW payments;
		DROP VIEW client_references;
		DROP TABLE payments_g1;
		DROP TABLE client_references_g1;
		CREATE TABLE payments_g1 (
			payment_id TEXT PRIMARY KEY,
			order_id   TEXT NOT NULL
		) STRICT;
		CREATE TABLE client_references_g1 (
			customer_id      TEXT NOT NULL,
			client_reference TEXT NOT NULL,
			order_id         TEXT NOT NULL,
			PRIMARY KEY (customer_id, client_reference)
		) STRICT;
		CREATE VIEW payments AS SELECT * FROM payments_g1;
		CREATE VIEW client_references AS SELECT * FROM client_references_g1;
		INSERT INTO payments_g1 VALUES ('pay-upgrade', '` + ids[1] + `');
		INSERT INTO client_references_g1 VALUES ('c-shared', 'po-upgrade', '` + ids[0] + `');
		CREATE TABLE checkpoints_v1 (
			name              TEXT PRIMARY KEY,
			generation        INTEGER NOT NULL,
			commit_position   INTEGER NOT NULL,
			prepare_position  INTEGER NOT NULL,
			shadow_generation INTEGER,
			shadow_commit     INTEGER,
			shadow_prepare    INTEGER
		) STRICT;
		INSERT INTO checkpoints_v1 SELECT name, generation, commit_position, prepare_position,
			shadow_generation, shadow_commit, shadow_prepare FROM projection_checkpoints;
		DROP TABLE projection_checkpoints;
		ALTER TABLE checkpoints_v1 RENAME TO projection_checkpoints;`)
	db.Close()
	if err != nil {
		t.Fatalf("write the version 1 lookups: %v", err)
	}

	s.start(t)
	s.confirmsOwn(t, "upgrade-callback", "pay-upgrade", ids)
	r := s.ok(t, adam, http.StatusOK, "GET", "/admin/projections", "", nil)
	for _, p := range r.json["projections"].([]any) {
		if p := p.(map[string]any); p["name"] == "lookups" && fmt.Sprint(p["generation"]) != "2" {
			t.Errorf("lookups after the upgrade: %v; want generation 2, rebuilt", p)
		}
	}
}
