package order_test

import (
	"errors"
	"flag"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// rapid's default of 100 sequences misses rare paths (a refund one unit too large was
	// found only after a few hundred), so run 1000 unless -rapid.checks says otherwise.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// TestRandomCommands runs random sequences of valid and invalid commands through Decide and
// Evolve and checks the order's invariants after every event and every command, and that every
// event decided can follow the state before it (Follows), as an auditor of the log checks.
func TestRandomCommands(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var (
			s         order.State
			history   []order.Event
			confirmed int
			at        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			at = at.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "seconds")) * time.Second)
			c := commandFor(s).Draw(t, "command")
			events, err := order.Decide(s, c, at)

			checkDecision(t, s, c, events, err)
			for _, e := range events {
				checkRoundTrip(t, e)
				if err := order.Follows(s, e); err != nil {
					t.Fatalf("Decide(%#v) decided %#v, which cannot follow: %v", c, e, err)
				}
				prev, snapshot := s, deepCopy(s)
				s = order.Evolve(s, e)
				history = append(history, e)
				if diff := cmp.Diff(snapshot, prev); diff != "" {
					t.Fatalf("Evolve(%s) changed the state it was given (-before +after):\n%s", e.EventType(), diff)
				}
				if s.Version != prev.Version+1 {
					t.Fatalf("version %d after %d on %s, want one more", s.Version, prev.Version, e.EventType())
				}
				if !s.UpdatedAt.Equal(at) {
					t.Fatalf("UpdatedAt %v, want the decision time %v", s.UpdatedAt, at)
				}
				if _, ok := e.(order.PaymentConfirmed); ok {
					confirmed++
				}
			}
			checkInvariants(t, s, confirmed)

			// Business idempotency: an accepted step, repeated, is a no-op.
			if err == nil && len(events) > 0 && repeatable(c) {
				again, err := order.Decide(s, c, at.Add(time.Minute))
				if err != nil || len(again) > 0 {
					t.Fatalf("repeating %#v decided %v, %v; want nothing", c, again, err)
				}
			}
		}
		if diff := cmp.Diff(fold(history), s); diff != "" {
			t.Fatalf("folding the history again gives another state (-refold +incremental):\n%s", diff)
		}
	})
}

func repeatable(c order.Command) bool {
	switch c.(type) {
	case order.StartPayment, order.ConfirmPayment, order.Ship, order.RequestRefund, order.CompleteRefund, order.ChangeLineQuantity:
		return true
	}
	return false
}

func checkDecision(t *rapid.T, s order.State, c order.Command, events []order.Event, err error) {
	if err == nil {
		return
	}
	var e *order.Error
	if !errors.As(err, &e) {
		t.Fatalf("Decide(%#v) returned %T %v, want *order.Error", c, err, err)
	}
	if e.Kind < order.KindInvalid || e.Kind > order.KindTooEarly {
		t.Fatalf("error of unknown kind %d: %v", e.Kind, err)
	}
	if e.State != s.Status || e.Command != c.CommandName() {
		t.Fatalf("error names %s/%s, want %s/%s", e.State, e.Command, s.Status, c.CommandName())
	}
	// The only refusals that decide something are a charge the order cannot accept and a
	// provider's report it cannot take.
	if len(events) > 0 {
		report := c
		if p, ok := c.(order.ProviderEvent); ok {
			report = p.Report
		}
		_, isConfirm := report.(order.ConfirmPayment)
		_, isCharge := events[0].(order.DuplicateChargeRecorded)
		_, isUnapplied := events[0].(order.ProviderEventUnapplied)
		_, isReport := c.(order.ProviderEvent)
		if len(events) != 1 || !(isConfirm && isCharge || isReport && isUnapplied) {
			t.Fatalf("%#v refused with %v but decided %#v", c, err, events)
		}
	}
}

func checkRoundTrip(t *rapid.T, e order.Event) {
	typ, data, err := order.Marshal(e)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", e, err)
	}
	got, err := order.Unmarshal(typ, data)
	if err != nil {
		t.Fatalf("Unmarshal(%s, %s): %v", typ, data, err)
	}
	if diff := cmp.Diff(e, got); diff != "" {
		t.Fatalf("%s changed in a round trip (-want +got):\n%s", typ, diff)
	}
}

func checkInvariants(t *rapid.T, s order.State, confirmed int) {
	if s.Status == order.StatusNone {
		if s.Version != 0 {
			t.Fatalf("no order but version %d", s.Version)
		}
		return
	}
	checkLines(t, s)

	// Never two confirmed payments, and never the confirmed payment also counted as a
	// duplicate charge.
	if confirmed > 1 {
		t.Fatalf("%d payments confirmed", confirmed)
	}
	charged := map[string]bool{}
	for c := range s.DuplicateCharges.All() {
		if charged[c.PaymentID] {
			t.Fatalf("charge %s recorded twice", c.PaymentID)
		}
		charged[c.PaymentID] = true
	}
	paidStates := []order.Status{order.StatusPaid, order.StatusShipped, order.StatusRefunding, order.StatusRefunded}
	if slices.Contains(paidStates, s.Status) {
		if confirmed != 1 || s.Paid != s.Total || s.Paid.Amount < 1 || charged[s.PaymentID] {
			t.Fatalf("%s order: %d confirmed, paid %v, total %v, payment %s, charges %v", s.Status, confirmed, s.Paid, s.Total, s.PaymentID, slices.Collect(s.DuplicateCharges.All()))
		}
	} else if s.Paid.Amount != 0 {
		t.Fatalf("%s order paid %v", s.Status, s.Paid)
	}

	// Refunded ≤ paid, counting the refund in progress.
	if s.Refunded.Amount < 0 || s.PendingRefund.Amount < 0 || s.Refunded.Amount+s.PendingRefund.Amount > s.Paid.Amount {
		t.Fatalf("refunded %v + pending %v > paid %v", s.Refunded, s.PendingRefund, s.Paid)
	}
	if (s.Status == order.StatusRefunding) != (s.PendingRefund.Amount > 0) {
		t.Fatalf("%s order with pending refund %v", s.Status, s.PendingRefund)
	}
	if s.CreatedAt.IsZero() || s.UpdatedAt.Before(s.CreatedAt) {
		t.Fatalf("created %v, updated %v", s.CreatedAt, s.UpdatedAt)
	}
}

// checkLines checks that the total is the sum of the lines, exactly, and each line is within
// bounds.
func checkLines(t *rapid.T, s order.State) {
	total := order.Money{Currency: s.Currency}
	skus := map[string]bool{}
	for _, l := range s.Lines {
		if skus[l.SKU] {
			t.Fatalf("sku %s on two lines: %v", l.SKU, s.Lines)
		}
		skus[l.SKU] = true
		if l.Quantity < 1 || l.Quantity > order.MaxQuantity || l.UnitPrice.Amount < 1 ||
			l.UnitPrice.Amount > order.MaxUnitPrice || l.UnitPrice.Currency != s.Currency {
			t.Fatalf("line out of bounds: %+v", l)
		}
		sub, err := l.UnitPrice.Mul(l.Quantity)
		if err != nil {
			t.Fatal(err)
		}
		if total, err = total.Add(sub); err != nil {
			t.Fatal(err)
		}
	}
	if s.Total != total || len(s.Lines) > order.MaxLines {
		t.Fatalf("total %v, sum of %d lines %v", s.Total, len(s.Lines), total)
	}
}

func deepCopy(s order.State) order.State {
	s.Lines = slices.Clone(s.Lines)
	s.DuplicateCharges = order.NewCharges(slices.Collect(s.DuplicateCharges.All())...)
	return s
}

// commandFor draws a command, valid or not, with fields drawn by drawFields.
func commandFor(s order.State) *rapid.Generator[order.Command] {
	return rapid.Custom(func(t *rapid.T) order.Command {
		f := drawFields(t, s)
		pay := order.Money{Amount: f.payAmount, Currency: f.cur}
		// Mostly CreateOrder while there is no order, rarely afterwards; Cancel is rare, or most
		// sequences would end early in cancelled.
		kinds := []int{0, 1, 1, 1, 2, 2, 3, 4, 4, 4, 5, 5, 5, 5, 6, 6, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10, 11, 11, 11, 11}
		if s.Status == order.StatusNone {
			kinds = []int{0, 0, 0, 0, 0, 0, 1, 5}
		}
		switch rapid.SampledFrom(kinds).Draw(t, "kind") {
		case 0:
			return order.CreateOrder{
				OrderID:    f.pick("orderID", []string{"ord-1"}, []string{""}),
				CustomerID: "cus-1",
				Currency:   f.cur,
				Lines:      rapid.SliceOfN(initialLine(), 0, 4).Draw(t, "lines"),
				ClientRef:  f.pick("clientRef", []string{"", "po 1"}, []string{"po\t1"}),
			}
		case 1:
			return order.AddLine{SKU: f.sku, Quantity: f.qty, UnitPrice: order.Money{Amount: f.price, Currency: f.cur}}
		case 2:
			return order.ChangeLineQuantity{SKU: f.sku, Quantity: f.qty}
		case 3:
			return order.RemoveLine{SKU: f.sku}
		case 4:
			return order.StartPayment{PaymentID: f.paymentID, Amount: pay}
		case 5:
			return order.ConfirmPayment{PaymentID: f.paymentID, Amount: pay}
		case 6:
			return order.FailPayment{PaymentID: f.paymentID, Reason: f.text}
		case 7:
			return order.Cancel{Reason: f.text}
		case 8:
			return order.Ship{
				Carrier:        f.pick("carrier", []string{"DHL"}, []string{"UPS", ""}),
				TrackingNumber: f.pick("tracking", []string{"t1"}, []string{"t2", ""}),
			}
		case 9:
			return order.RequestRefund{RefundID: f.refundID, Amount: order.Money{Amount: f.refundAmount, Currency: f.cur}}
		case 10:
			return order.CompleteRefund{RefundID: f.refundID}
		}
		// A provider's report of a payment, or of a refund with the amount it paid out, also of
		// the payment that failed last: it reports every attempt, in any order.
		paymentID := f.pick("reportedPayment", []string{f.paymentID, s.FailedPayment}, nil)
		report := rapid.SampledFrom([]order.Command{
			order.ConfirmPayment{PaymentID: paymentID, Amount: pay},
			order.FailPayment{PaymentID: paymentID, Reason: f.text},
			order.CompleteRefund{RefundID: f.refundID, Amount: order.Money{Amount: f.refundAmount, Currency: f.cur}},
		}).Draw(t, "report")
		return order.ProviderEvent{Provider: "psp", EventID: f.pick("eventID", []string{"evt-1", "evt-2"}, []string{""}),
			EventType: "payment.reported", Report: report}
	})
}

// fields are the values a command is made of, drawn for an order in some state.
type fields struct {
	pick                                func(label string, good []string, any []string) string
	sku, paymentID, refundID, text      string
	cur                                 order.Currency
	qty, price, payAmount, refundAmount int64
}

// drawFields draws the fields of a command for s. Three times in four every field takes a
// value that fits s (its total, its payment and refund ids, a well-formed SKU), so that
// sequences get past the first checks and reach every state; otherwise each field is drawn
// from a pool that includes wrong and malformed values.
func drawFields(t *rapid.T, s order.State) fields {
	fit := rapid.IntRange(0, 3).Draw(t, "fit") > 0
	pick := func(label string, good []string, any []string) string {
		if fit {
			return rapid.SampledFrom(good).Draw(t, label)
		}
		return rapid.SampledFrom(append(slices.Clone(good), any...)).Draw(t, label)
	}
	pickInt := func(label string, good []int64, any []int64) int64 {
		if fit {
			return rapid.SampledFrom(good).Draw(t, label)
		}
		return rapid.SampledFrom(append(slices.Clone(good), any...)).Draw(t, label)
	}
	badAmounts := []int64{0, -1, order.MaxAmount + 1, math.MaxInt64}
	left := s.Paid.Amount - s.Refunded.Amount
	return fields{
		pick:  pick,
		sku:   pick("sku", []string{"A", "B", "C"}, []string{"", "A A"}),
		qty:   pickInt("qty", []int64{1, 2, 3}, []int64{0, -1, order.MaxQuantity - 1, order.MaxQuantity, order.MaxQuantity + 1}),
		cur:   order.Currency(pick("currency", []string{"EUR"}, []string{"USD", "eur"})),
		price: pickInt("price", []int64{100, 250}, []int64{1, 0, -5, order.MaxUnitPrice, order.MaxUnitPrice + 1}),
		// Amounts one off the right one count as fitting: they are the likeliest mistakes.
		payAmount:    pickInt("payAmount", []int64{s.Total.Amount, s.Total.Amount, s.Total.Amount, s.Total.Amount + 1}, append([]int64{s.Total.Amount - 1, 1}, badAmounts...)),
		refundAmount: pickInt("refundAmount", []int64{left, left, left / 2, left + 1}, append([]int64{s.PendingRefund.Amount}, badAmounts...)),
		paymentID:    pick("paymentID", []string{s.PaymentID, s.PaymentID, "p1", "p2"}, []string{"p3", ""}),
		refundID:     pick("refundID", []string{s.RefundID, "r1"}, []string{"r2", ""}),
		text:         pick("text", []string{"declined", "customer asked"}, []string{"", " padded", "two\nlines"}),
	}
}

// initialLine draws a well-formed line of a CreateOrder.
func initialLine() *rapid.Generator[order.AddLine] {
	return rapid.Custom(func(t *rapid.T) order.AddLine {
		return order.AddLine{
			SKU:       rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "sku"),
			Quantity:  rapid.Int64Range(1, 5).Draw(t, "qty"),
			UnitPrice: order.Money{Amount: rapid.SampledFrom([]int64{100, 250}).Draw(t, "price"), Currency: "EUR"},
		}
	})
}

// TestEvolveNeverPanics folds arbitrary events, including ones Decide would never produce
// (absurd amounts, unknown SKUs, events out of order), and values that are not events.
func TestEvolveNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s order.State
		n := 0
		for range rapid.IntRange(0, 40).Draw(t, "events") {
			e := anyEvent().Draw(t, "event")
			before := s
			s = order.Evolve(s, e)
			if e == nil {
				continue
			}
			if _, isPointer := e.(*order.Created); isPointer {
				if diff := cmp.Diff(before, s); diff != "" {
					t.Fatalf("a pointer event changed the state:\n%s", diff)
				}
				continue
			}
			n++
			if s.Version != int64(n) {
				t.Fatalf("version %d after %d events", s.Version, n)
			}
		}
	})
}

func anyEvent() *rapid.Generator[order.Event] {
	return rapid.Custom(func(t *rapid.T) order.Event {
		str := func(label string) string { return rapid.SampledFrom([]string{"", "A", "B", "x\x00y"}).Draw(t, label) }
		num := func(label string) int64 {
			return rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{0, 1, -1, math.MaxInt64, math.MinInt64})).Draw(t, label)
		}
		money := func(label string) order.Money {
			return order.Money{Amount: num(label), Currency: rapid.SampledFrom([]order.Currency{"EUR", "", "usd"}).Draw(t, label+"Currency")}
		}
		at := time.Unix(rapid.Int64Range(-1e10, 1e10).Draw(t, "at"), 0)
		switch rapid.IntRange(0, 14).Draw(t, "type") {
		case 0:
			return order.Created{OrderID: str("id"), CustomerID: str("customer"), Currency: order.Currency(str("currency")), At: at}
		case 1:
			return order.LineAdded{SKU: str("sku"), Quantity: num("qty"), UnitPrice: money("price"), At: at}
		case 2:
			return order.LineQuantityChanged{SKU: str("sku"), Quantity: num("qty"), At: at}
		case 3:
			return order.LineRemoved{SKU: str("sku"), At: at}
		case 4:
			return order.PaymentStarted{PaymentID: str("payment"), Amount: money("amount"), At: at}
		case 5:
			return order.PaymentConfirmed{PaymentID: str("payment"), Amount: money("amount"), At: at}
		case 6:
			return order.PaymentFailed{PaymentID: str("payment"), At: at}
		case 7:
			return order.Cancelled{At: at}
		case 8:
			return order.Shipped{Carrier: str("carrier"), TrackingNumber: str("tracking"), At: at}
		case 9:
			return order.RefundRequested{RefundID: str("refund"), Amount: money("amount"), At: at}
		case 10:
			return order.RefundCompleted{RefundID: str("refund"), Amount: money("amount"), At: at}
		case 11:
			return order.DuplicateChargeRecorded{PaymentID: str("payment"), Amount: money("amount"), At: at}
		case 12:
			return nil
		case 13:
			return (*order.Created)(nil)
		default:
			return &order.Created{OrderID: "ptr"}
		}
	})
}
