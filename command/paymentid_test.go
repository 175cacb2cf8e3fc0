package command_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
	"github.com/google/uuid"
)

func startPay(paymentID string) order.StartPayment {
	return order.StartPayment{PaymentID: paymentID, Amount: eur(2000)}
}

// forEachStore runs test on the embedded store as it is (claims appended with the order's
// events in one step), as a store that appends to one stream at a time (claims first), and on
// the KurrentDB backend (a test server), which appends one stream at a time too.
func forEachStore(t *testing.T, test func(t *testing.T, h *command.Handler)) {
	for _, name := range []string{"OneStep", "ClaimFirst", "KurrentDB"} {
		t.Run(name, func(t *testing.T) {
			h, s := newHandler(t)
			switch name {
			case "ClaimFirst":
				h.Store = singleStore{s}
			case "KurrentDB":
				h.Store = kurrentStore(t)
			}
			test(t, h)
		})
	}
}

// kurrentStore is the KurrentDB backend on a test server of its own.
func kurrentStore(t *testing.T) *kurrent.Store {
	t.Helper()
	srv, err := kurrenttest.Start("127.0.0.1:0", t.TempDir(), kurrenttest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s, err := kurrent.Open(kurrent.Config{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// created creates the orders ids as principal.
func created(t *testing.T, h *command.Handler, principal string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := h.Handle(context.Background(), id, create(id), as(principal, "create-"+id)); err != nil {
			t.Fatal(err)
		}
	}
}

// A payment id leads a provider's callback to one order of its client: a second order of the
// client cannot start it, and changes nothing; the order that has it may start it again.
func TestPaymentIDBelongsToOneOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *command.Handler) {
		ctx := context.Background()
		created(t, h, "alice", "o1", "o2")
		created(t, h, "bob", "o3")
		first, err := h.Handle(ctx, "o1", startPay("pay-1"), as("alice", "start-1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(ctx, "o2", startPay("pay-1"), as("alice", "start-2")); !errors.Is(err, command.ErrPaymentIDTaken) {
			t.Fatalf("alice's second order starting pay-1: %v; want ErrPaymentIDTaken", err)
		}
		// Refused with the claim of its idempotency key along: where they are one append, that
		// is not written either.
		key := newAlong("claim-start-2")
		_, err = handleWith(ctx, h, key, "o2", startPay("pay-1"), as("alice", "start-2"))
		if _, oneStep := h.Store.(eventstore.MultiStreamAppender); !errors.Is(err, command.ErrPaymentIDTaken) || oneStep && key.made != nil {
			t.Fatalf("with a key claim along: %v, made %v; want ErrPaymentIDTaken, nothing made", err, key.made)
		}
		if o, _ := h.Load(ctx, "o2", "", ""); o.State.Status != order.StatusCreated || o.State.Version != 2 {
			t.Fatalf("the refused order: %s at version %d; want created, unchanged", o.State.Status, o.State.Version)
		}
		if _, err := h.Handle(ctx, "o3", startPay("pay-1"), as("bob", "start-3")); err != nil {
			t.Fatalf("bob's order starting alice's payment id: %v", err)
		}

		again, err := h.Handle(ctx, "o1", startPay("pay-1"), as("alice", "start-1"))
		if err != nil || !again.Repeated || again.Position != first.Position {
			t.Fatalf("the start retried: %+v, %v; want the first run's answer", again, err)
		}
		if res, err := h.Handle(ctx, "o1", startPay("pay-1"), as("alice", "start-1b")); err != nil || len(res.Events) != 0 {
			t.Fatalf("the start sent again with another key: %v, %v; want success, nothing appended", res.Events, err)
		}
		// Failed, and started again on the same order: its claim is its own.
		if _, err := h.Handle(ctx, "o1", order.FailPayment{PaymentID: "pay-1", Reason: "declined"}, as("alice", "fail-1")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(ctx, "o1", startPay("pay-1"), as("alice", "start-1c")); err != nil {
			t.Fatalf("pay-1 started again on its order after it failed: %v", err)
		}
		if _, err := h.Handle(ctx, "o2", startPay("pay-2"), as("alice", "start-2b")); err != nil {
			t.Fatalf("alice's second order with another payment id: %v", err)
		}
	})
}

// An idempotency key is the client's again once it expired: reused to start the same payment
// on another order, it is refused, not taken for a repeat of the first claim.
func TestPaymentIDClaimWithAKeyReusedOnAnotherOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *command.Handler) {
		ctx := context.Background()
		created(t, h, "alice", "o1", "o2")
		if _, err := h.Handle(ctx, "o1", startPay("pay-1"), as("alice", "start")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Handle(ctx, "o2", startPay("pay-1"), as("alice", "start")); !errors.Is(err, command.ErrPaymentIDTaken) {
			t.Fatalf("the key reused on another order: %v; want ErrPaymentIDTaken", err)
		}
	})
}

// Orders racing to start one payment id, through handlers of their own as on several nodes:
// exactly one gets it, on every store.
func TestPaymentIDRace(t *testing.T) {
	forEachStore(t, func(t *testing.T, h *command.Handler) {
		ctx := context.Background()
		const rounds, racers = 10, 4
		nodes := make([]*command.Handler, racers)
		for i := range nodes {
			nodes[i] = &command.Handler{Store: h.Store, Now: h.Now}
		}
		for r := range rounds {
			var ids []string
			for i := range racers {
				ids = append(ids, fmt.Sprintf("o%d-%d", r, i))
			}
			created(t, h, "alice", ids...)
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Go(func() {
					_, errs[i] = nodes[i].Handle(ctx, id, startPay(fmt.Sprint("pay-", r)), as("alice", "start-"+id))
				})
			}
			wg.Wait()
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, command.ErrPaymentIDTaken):
					t.Fatalf("racer %s: %v", ids[i], err)
				}
			}
			paying := 0
			for _, id := range ids {
				if o, _ := h.Load(ctx, id, "", ""); o.State.Status == order.StatusPaying {
					paying++
				}
			}
			if won != 1 || paying != 1 {
				t.Fatalf("round %d: %d started, %d paying; want exactly one", r, won, paying)
			}
		}
	})
}

// A payment started before payment ids were claimed has no claim: it still confirms, and the
// first start of its id since claims it.
func TestPaymentStartedBeforeClaims(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	created(t, h, "alice", "o1", "o2", "o3")
	for _, id := range []string{"o1", "o2"} {
		// What the handler appended then: the order's event alone.
		o, err := h.Load(ctx, id, "", "")
		if err != nil {
			t.Fatal(err)
		}
		typ, data, _ := order.Marshal(order.PaymentStarted{PaymentID: "pay-old", Amount: eur(2000), At: t0})
		if _, err := s.Append(ctx, command.StreamName(id), eventstore.Exact(o.Revision()),
			eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: []byte(`{"principal":"alice","command":"start-payment"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := h.Handle(ctx, "o1", order.ConfirmPayment{PaymentID: "pay-old", Amount: eur(2000)}, as("alice", "confirm"))
	if err != nil || res.State.Status != order.StatusPaid {
		t.Fatalf("confirm of a payment started before claims: %v, %v; want paid", res.State.Status, err)
	}
	if _, err := h.Handle(ctx, "o2", order.FailPayment{PaymentID: "pay-old", Reason: "declined"}, as("alice", "fail")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, "o2", startPay("pay-old"), as("alice", "restart")); err != nil {
		t.Fatalf("the id started again on its order: %v", err)
	}
	if _, err := h.Handle(ctx, "o3", startPay("pay-old"), as("alice", "start-3")); !errors.Is(err, command.ErrPaymentIDTaken) {
		t.Fatalf("another order after that: %v; want ErrPaymentIDTaken", err)
	}
}
