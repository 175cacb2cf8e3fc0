package audit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/acme/orders/audit"
	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"pgregory.net/rapid"
)

// openStore opens an empty embedded store, closed when the test ends.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// handle runs c on order id as its own principal, so that orders do not share payment ids,
// under key. A refusal of the order is an outcome like any other; any other error is not.
func handle(ctx context.Context, h *command.Handler, id, key string, c order.Command) (command.Result, error) {
	res, err := h.Handle(ctx, id, c, command.Metadata{Principal: id, IdempotencyKey: key})
	var refused *order.Error
	if err != nil && !errors.As(err, &refused) {
		return res, fmt.Errorf("%s on %s: %w", c.CommandName(), id, err)
	}
	return res, nil
}

// writeOrder creates order id with one line of 2 × 500 EUR, runs commands on it and returns
// the last one's result.
func writeOrder(t *testing.T, h *command.Handler, id string, commands []order.Command) command.Result {
	t.Helper()
	create := order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR",
		Lines: []order.AddLine{{SKU: "a", Quantity: 2, UnitPrice: eur(500)}}}
	var res command.Result
	for i, c := range append([]order.Command{create}, commands...) {
		var err error
		if res, err = handle(context.Background(), h, id, fmt.Sprint("k", i), c); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// checkStream verifies the stream of order id as 'api audit verify' verifies each stream.
func checkStream(ctx context.Context, s *sqlite.Store, id string) ([]audit.Finding, error) {
	return audit.CheckStream(ctx, s.ReadStream(ctx, command.StreamName(id), eventstore.ReadStreamOptions{}))
}

// A payment provider reports every attempt of a payment, in any order, and reports on orders
// that have moved on; the order records what it cannot take. The verifier must take every log
// these flows write: the provider's late or repeated events are the service's own.
func TestProviderFlowsVerifyClean(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	h := &command.Handler{Store: s}
	const unapplied, confirmed = "order.provider-event-unapplied.v1", "order.payment-confirmed.v1"
	// psp is c as a payment provider reports it, each report a distinct event of the provider.
	reports := 0
	psp := func(c order.Command) order.ProviderEvent {
		reports++
		return order.ProviderEvent{Provider: "psp", EventID: fmt.Sprint("evt-", reports), EventType: "payment.reported", Report: c}
	}
	var (
		start    = order.StartPayment{PaymentID: "pay-1", Amount: eur(1000)}
		confirm  = order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(1000)}
		fail     = order.FailPayment{PaymentID: "pay-1", Reason: "card declined"}
		refund   = order.RequestRefund{RefundID: "ref-1", Amount: eur(400)}
		refunded = order.CompleteRefund{RefundID: "ref-1"}
		ship     = order.Ship{Carrier: "ups", TrackingNumber: "t-1"}
		cancel   = order.Cancel{Reason: "customer asked"}
	)
	cases := []struct {
		name     string
		commands []order.Command // after writeOrder's create
		status   order.Status
		last     string // the type of the stream's last event
	}{
		{"failure then success of pay-1", []order.Command{start, psp(fail), psp(confirm)}, order.StatusPaid, confirmed},
		{"success then late failure", []order.Command{start, psp(confirm), psp(fail)}, order.StatusPaid, unapplied},
		{"failure after failure", []order.Command{start, psp(fail), psp(fail)}, order.StatusCreated, unapplied},
		{"failure of another payment while paying", []order.Command{start, psp(order.FailPayment{PaymentID: "pay-0", Reason: "expired"})}, order.StatusPaying, unapplied},
		{"late failure when shipped", []order.Command{start, psp(confirm), ship, psp(fail)}, order.StatusShipped, unapplied},
		{"late failure while refunding", []order.Command{start, psp(confirm), refund, psp(fail)}, order.StatusRefunding, unapplied},
		{"unapplied after refunded", []order.Command{start, psp(confirm), refund, psp(refunded), psp(fail)}, order.StatusRefunded, unapplied},
		{"unapplied after cancelled", []order.Command{start, cancel, psp(fail)}, order.StatusCancelled, unapplied},
		{"refund after cancelled", []order.Command{cancel, psp(order.CompleteRefund{RefundID: "ref-9", Amount: eur(1000)})}, order.StatusCancelled, unapplied},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("flow%02d", i)
			res := writeOrder(t, h, id, tc.commands)
			if n := len(res.Events); n == 0 || res.State.Status != tc.status || res.Events[n-1].EventType() != tc.last {
				t.Fatalf("the last command left the order %s with events %v; want %s, ending with %s", res.State.Status, res.Events, tc.status, tc.last)
			}
			findings, err := checkStream(ctx, s, id)
			if err != nil || len(findings) != 0 {
				t.Fatalf("findings on a log the service wrote: %v (%v)", findings, err)
			}
		})
	}
	rep, err := (&audit.Verifier{Feed: s}).Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 || rep.Streams != len(cases) {
		t.Fatalf("verified %d streams with findings %v; want %d and none", rep.Streams, rep.Findings, len(cases))
	}
}

// TestDecidedLogsVerifyClean runs random sequences of every command, a provider's reports
// among them, through the command handler (which decides them with order.Decide and chains
// the events) into a real store, and verifies each order's stream: whatever the domain
// decides, the verifier takes.
func TestDecidedLogsVerifyClean(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	h := &command.Handler{Store: s}
	orders := 0
	rapid.Check(t, func(t *rapid.T) {
		orders++
		id := fmt.Sprintf("rand%05d", orders)
		var st order.State
		for step := range rapid.IntRange(1, 40).Draw(t, "steps") {
			res, err := handle(ctx, h, id, fmt.Sprint("k", step), anyCommand(st).Draw(t, "command"))
			if err != nil {
				t.Fatal(err)
			}
			st = res.State
		}
		if st.Version == 0 {
			return // no order was created: no stream to verify
		}
		findings, err := checkStream(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(findings) != 0 {
			t.Fatalf("findings on a log the service wrote: %v", findings)
		}
	})
	rep, err := (&audit.Verifier{Feed: s}).Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Fatalf("%d findings over the whole log, first %v", len(rep.Findings), rep.Findings[0])
	}
}

// anyCommand draws any command of the domain for an order in state s, a provider's reports
// among them. Its facts are mostly s's (its total, payment, failed payment and refund), and
// the commands that move an order on are drawn more often than the ones that end it, so
// that sequences reach every state and report on every one.
func anyCommand(s order.State) *rapid.Generator[order.Command] {
	return rapid.Custom(func(t *rapid.T) order.Command {
		if s.Status == order.StatusNone && rapid.IntRange(0, 4).Draw(t, "create") > 0 {
			return order.CreateOrder{OrderID: "any", CustomerID: "c1", Currency: "EUR",
				Lines: rapid.SliceOfN(line(), 1, 2).Draw(t, "lines")}
		}
		// rapid draws the first values of a list more often than the others: the ones that
		// move the order on come first.
		var paymentIDs []string
		for _, id := range []string{s.FailedPayment, s.PaymentID, "pay-1", "pay-2"} {
			if id != "" {
				paymentIDs = append(paymentIDs, id)
			}
		}
		paymentID := rapid.SampledFrom(paymentIDs).Draw(t, "paymentID")
		payAmount := eur(rapid.SampledFrom([]int64{s.Total.Amount, s.Total.Amount, s.Total.Amount, s.Total.Amount + 1}).Draw(t, "payAmount"))
		left := s.Paid.Amount - s.Refunded.Amount
		refundID := rapid.SampledFrom([]string{s.RefundID, "ref-1", "ref-2"}).Draw(t, "refundID")
		if refundID == "" {
			refundID = "ref-1"
		}
		refundAmount := eur(rapid.SampledFrom([]int64{left, left / 2, left + 1, s.PendingRefund.Amount}).Draw(t, "refundAmount"))
		completed := order.CompleteRefund{RefundID: refundID}
		if rapid.Bool().Draw(t, "refundAmountGiven") {
			completed.Amount = refundAmount
		}
		sku := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "sku")
		confirm := order.ConfirmPayment{PaymentID: paymentID, Amount: payAmount}
		fail := order.FailPayment{PaymentID: paymentID, Reason: "declined"}
		// A provider may deliver one event twice, or report one fact in two events.
		psp := func(c order.Command) order.Command {
			return order.ProviderEvent{Provider: "psp", EventType: "payment.reported",
				EventID: rapid.SampledFrom([]string{"evt-1", "evt-2", "evt-3"}).Draw(t, "eventID"), Report: c}
		}
		start := order.StartPayment{PaymentID: paymentID, Amount: payAmount}
		ship := order.Ship{Carrier: "ups", TrackingNumber: rapid.SampledFrom([]string{"t-1", "t-2"}).Draw(t, "tracking")}
		refund := order.RequestRefund{RefundID: refundID, Amount: refundAmount}
		every := []order.Command{
			start, psp(fail), psp(confirm), ship, refund, psp(completed), completed, confirm, fail,
			line().Draw(t, "line"),
			order.ChangeLineQuantity{SKU: sku, Quantity: rapid.Int64Range(1, 3).Draw(t, "qty")},
			order.RemoveLine{SKU: sku},
			order.Cancel{Reason: "customer asked"},
			order.CreateOrder{OrderID: "any", CustomerID: "c1", Currency: "EUR"},
		}
		onward := map[order.Status][]order.Command{
			order.StatusCreated:   {psp(confirm), start, psp(fail), start, psp(confirm), start},
			order.StatusPaying:    {psp(confirm), psp(confirm), psp(fail)},
			order.StatusPaid:      {ship, refund, psp(completed), psp(fail)},
			order.StatusShipped:   {refund, psp(completed)},
			order.StatusRefunding: {completed, psp(completed)},
		}[s.Status]
		return rapid.SampledFrom(append(onward, every...)).Draw(t, "command")
	})
}

func line() *rapid.Generator[order.AddLine] {
	return rapid.Custom(func(t *rapid.T) order.AddLine {
		return order.AddLine{SKU: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "sku"),
			Quantity: rapid.Int64Range(1, 3).Draw(t, "qty"), UnitPrice: eur(rapid.SampledFrom([]int64{100, 250}).Draw(t, "price"))}
	})
}
