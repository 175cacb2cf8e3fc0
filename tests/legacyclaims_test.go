package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// The server scans the log for client-reference claims from before claims were per principal
// (legacy claims, named by customer and reference alone) in the background at start, and logs
// what it found; if none, it writes the marker command.NoLegacyClientRefsStream and its creates
// read no legacy claim stream (see command.Handler.ScanLegacyClientRefs).
const (
	legacyFound = "legacy client-reference claims found"
	legacyNone  = "no legacy client-reference claims"
)

// waitForLegacyScan waits for the running process of s to log the outcome of its scan, want.
func waitForLegacyScan(t *testing.T, s *server, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the scan for legacy client-reference claims", func() bool {
		logs := s.current().stderr.String()
		if other := map[string]string{legacyFound: legacyNone, legacyNone: legacyFound}[want]; strings.Contains(logs, other) {
			t.Fatalf("the server logged %q; want %q:\n%s", other, want, tail(logs, 4<<10))
		}
		return strings.Contains(logs, want)
	})
}

// hasLegacyMarker reports whether the embedded store in dir holds the marker of no legacy
// client-reference claims; the server must be stopped.
func hasLegacyMarker(t *testing.T, dir string) bool {
	t.Helper()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for e, err := range s.ReadStream(context.Background(), command.NoLegacyClientRefsStream, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return e.Type == command.TypeNoLegacyClientRefs
	}
	return false
}

// writeLegacyStore writes into dir a store as a release before per-principal claims left it:
// an order of the development principal whose client reference ref of customer is claimed in
// the legacy stream. It returns the order's id.
func writeLegacyStore(t *testing.T, dir, customer, ref string) string {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := command.NewOrderIDs().New(time.Now()).String()
	c := order.CreateOrder{OrderID: id, CustomerID: customer, Currency: "EUR", ClientRef: ref,
		Lines: []order.AddLine{{SKU: "sku-1", Quantity: 2, UnitPrice: order.Money{Amount: 1000, Currency: "EUR"}}}}
	// Created without a claim of its own (no reference in the command), then claimed as those
	// releases claimed it.
	noRef := c
	noRef.ClientRef = ""
	md := command.Metadata{Principal: "local", IdempotencyKey: "legacy-create", Fingerprint: "legacy-create"}
	if _, err := (&command.Handler{Store: s}).Handle(ctx, id, noRef, md); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(customer + "\x00" + ref))
	data, _ := json.Marshal(map[string]string{"customerId": customer, "clientReference": ref, "orderId": id})
	if _, err := s.Append(ctx, command.ClientRefPrefix+hex.EncodeToString(sum[:]), eventstore.NoStream,
		eventstore.EventData{ID: uuid.New(), Type: command.TypeClientRefClaimed, Data: data}); err != nil {
		t.Fatal(err)
	}
	return id
}

// A store that holds a legacy client-reference claim is scanned at every start and never gets
// the marker: the claim keeps refusing its reference to another order of its principal, after a
// restart too, while other references are taken as ever.
func TestLegacyClientRefClaimRefusesAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeLegacyStore(t, dir, "c-legacy", "PO 7")
	s := startServer(t, dir)
	for run := range 2 {
		if run > 0 {
			s.restart(t)
		}
		waitForLegacyScan(t, s, legacyFound)
		again := orderFor("c-legacy")
		again.ClientReference = "PO 7"
		checkProblem(t, s.do(t, "POST", "/v1/orders", "legacy-again-"+string(rune('a'+run)), again), http.StatusUnprocessableEntity, "command-rejected")
		other := orderFor("c-legacy")
		other.ClientReference = "PO 8-" + string(rune('a'+run))
		wantStatus(t, s.do(t, "POST", "/v1/orders", "legacy-other-"+string(rune('a'+run)), other), http.StatusCreated)
	}
	s.current().stop(t)
	if hasLegacyMarker(t, dir) {
		t.Error("a store with a legacy client-reference claim got the marker of none")
	}
}
