package order

import (
	"cmp"
	"time"
)

// Decide decides what command c does to the order in state s, at time now. It reads no clock,
// makes no ids and does no I/O: now becomes the At of every event (converted to UTC) and every
// id comes in the command.
//
// The results, in full in the package documentation:
//   - events, nil: append the events.
//   - no events, nil: the command is already in effect; nothing to append, report success.
//   - no events, error: the command is refused and the order is unchanged.
//   - events AND error: the command is refused, but money arrived that must be recorded
//     (a DuplicateChargeRecorded event). Append the events, then report the error.
//
// So: whenever len(events) > 0, append them, whatever err is.
//
// Every error is an *Error with one of the Kind constants; its State and Command name the
// order's status and c.
func Decide(s State, c Command, now time.Time) ([]Event, error) {
	if c == nil {
		return nil, &Error{Kind: KindInvalid, State: s.Status, Msg: "no command"}
	}
	events, err := decide(s, c, now.UTC())
	if err != nil {
		err.State, err.Command = s.Status, c.CommandName()
		return events, err
	}
	return events, nil
}

func decide(s State, c Command, at time.Time) ([]Event, *Error) {
	// Existence is checked before the command's fields so that every command on a missing order
	// answers "not found", and every CreateOrder on an existing one "already exists".
	if _, ok := c.(CreateOrder); ok {
		if s.Status != StatusNone {
			return nil, errorf(KindAlreadyExists, "order %s already exists", s.ID)
		}
	} else if s.Status == StatusNone {
		return nil, errorf(KindNotFound, "the order does not exist")
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	switch c := c.(type) {
	case CreateOrder:
		return createOrder(c, at)
	case AddLine:
		return addLine(s, c, at)
	case ChangeLineQuantity:
		return changeLineQuantity(s, c, at)
	case RemoveLine:
		return removeLine(s, c, at)
	case StartPayment:
		return startPayment(s, c, at)
	case ConfirmPayment:
		return confirmPayment(s, c, at)
	case FailPayment:
		return failPayment(s, c, at)
	case Cancel:
		return cancel(s, c, at)
	case Ship:
		return ship(s, c, at)
	case RequestRefund:
		return requestRefund(s, c, at)
	case CompleteRefund:
		return completeRefund(s, c, at)
	case ProviderEvent:
		return providerEvent(s, c, at)
	}
	return nil, errorf(KindInvalid, "%T is not an order command; pass commands as values", c)
}

func createOrder(c CreateOrder, at time.Time) ([]Event, *Error) {
	created := Created{OrderID: c.OrderID, CustomerID: c.CustomerID, Currency: c.Currency, ClientRef: c.ClientRef,
		Channel: cmp.Or(c.Channel, ChannelDefault), At: at}
	events := []Event{created}
	s := Evolve(State{}, created)
	// Initial lines follow exactly the rules of AddLine, so creating with lines and adding
	// them one by one give the same order.
	for i, l := range c.Lines {
		evs, err := addLine(s, l, at)
		if err != nil {
			// Against an existing order these would be rejections; here the whole order is the
			// client's input, so a conflict inside it is invalid input.
			return nil, errorf(KindInvalid, "lines[%d]: %s", i, err.Msg)
		}
		for _, e := range evs {
			s = Evolve(s, e)
		}
		events = append(events, evs...)
	}
	return events, nil
}

// Which event can follow which state is for follows to say (see Follows): each command below
// asks it about the event it would decide, so that Decide and an auditor of the log keep one
// state machine.

func addLine(s State, c AddLine, at time.Time) ([]Event, *Error) {
	if err := s.follows(LineAdded{}); err != nil {
		return nil, err
	}
	if c.UnitPrice.Currency != s.Currency {
		return nil, errorf(KindRejected, "unit price is in %s, the order is in %s", c.UnitPrice.Currency, s.Currency)
	}
	i := s.lineIndex(c.SKU)
	if i < 0 {
		if len(s.Lines) >= MaxLines {
			return nil, errorf(KindRejected, "the order already has %d lines, the most it can have", MaxLines)
		}
		return []Event{LineAdded{SKU: c.SKU, Name: c.Name, Quantity: c.Quantity, UnitPrice: c.UnitPrice, At: at}}, nil
	}
	l := s.Lines[i]
	if l.UnitPrice != c.UnitPrice {
		return nil, errorf(KindRejected, "sku %s is in the order at %s, not %s; remove the line to change its price", c.SKU, l.UnitPrice, c.UnitPrice)
	}
	q := l.Quantity + c.Quantity // both at most MaxQuantity: cannot overflow
	if q > MaxQuantity {
		return nil, errorf(KindRejected, "sku %s would have quantity %d, more than %d", c.SKU, q, MaxQuantity)
	}
	return []Event{LineQuantityChanged{SKU: c.SKU, Quantity: q, At: at}}, nil
}

func changeLineQuantity(s State, c ChangeLineQuantity, at time.Time) ([]Event, *Error) {
	if err := s.follows(LineQuantityChanged{}); err != nil {
		return nil, err
	}
	i := s.lineIndex(c.SKU)
	switch {
	case i < 0:
		return nil, errorf(KindNotFound, "the order has no line for sku %s", c.SKU)
	case s.Lines[i].Quantity == c.Quantity:
		return nil, nil
	}
	return []Event{LineQuantityChanged{SKU: c.SKU, Quantity: c.Quantity, At: at}}, nil
}

func removeLine(s State, c RemoveLine, at time.Time) ([]Event, *Error) {
	removed := LineRemoved{SKU: c.SKU, At: at}
	if err := s.follows(removed); err != nil {
		return nil, err
	}
	if s.lineIndex(c.SKU) < 0 {
		return nil, errorf(KindNotFound, "the order has no line for sku %s", c.SKU)
	}
	return []Event{removed}, nil
}

func startPayment(s State, c StartPayment, at time.Time) ([]Event, *Error) {
	if c.PaymentID == s.PaymentID && c.Amount == s.Total && (s.Status == StatusPaying || s.paymentConfirmed()) {
		return nil, nil // this payment was already started
	}
	started := PaymentStarted{PaymentID: c.PaymentID, Amount: c.Amount, At: at}
	switch err := s.follows(started); {
	case err != nil:
		return nil, err
	case len(s.Lines) == 0:
		return nil, errorf(KindRejected, "the order has no lines")
	case c.Amount != s.Total:
		return nil, errorf(KindRejected, "amount %s does not equal the order total %s", c.Amount, s.Total)
	}
	return []Event{started}, nil
}

// confirmPayment is where the double charge of seed 001 is made impossible. The provider tells
// us money was captured; the order accepts exactly one payment, and any other capture is
// recorded (once per payment id) so that it can be refunded.
func confirmPayment(s State, c ConfirmPayment, at time.Time) ([]Event, *Error) {
	if s.paymentConfirmed() && c.PaymentID == s.PaymentID {
		if c.Amount == s.Paid {
			return nil, nil // the provider retried its callback
		}
		return nil, errorf(KindRejected, "payment %s was confirmed for %s, not %s", c.PaymentID, s.Paid, c.Amount)
	}
	if err := s.unrecorded(c.PaymentID); err != nil {
		return nil, err
	}
	record := func(reason ChargeReason) []Event {
		return []Event{DuplicateChargeRecorded{PaymentID: c.PaymentID, Amount: c.Amount, Reason: reason, At: at}}
	}
	switch {
	case s.paymentConfirmed():
		return record(ChargeAlreadyPaid), errorf(KindRejected,
			"the order is already paid by payment %s; payment %s is recorded as a duplicate charge to refund", s.PaymentID, c.PaymentID)
	case s.Status != StatusPaying:
		return record(ChargeNotAwaitingPayment), errorf(KindInvalidTransition,
			"no payment is in progress; payment %s is recorded as a duplicate charge to refund", c.PaymentID)
	case c.PaymentID != s.PaymentID:
		return record(ChargePaymentMismatch), errorf(KindRejected,
			"payment %s is in progress, not %s; payment %s is recorded as a duplicate charge to refund", s.PaymentID, c.PaymentID, c.PaymentID)
	case c.Amount != s.Total:
		return record(ChargeAmountMismatch), errorf(KindRejected,
			"amount %s does not equal the order total %s; payment %s is recorded as a duplicate charge to refund", c.Amount, s.Total, c.PaymentID)
	}
	return []Event{PaymentConfirmed{PaymentID: c.PaymentID, Amount: c.Amount, At: at}}, nil
}

func failPayment(s State, c FailPayment, at time.Time) ([]Event, *Error) {
	failed := PaymentFailed{PaymentID: c.PaymentID, Reason: c.Reason, At: at}
	if err := s.follows(failed); err != nil {
		return nil, err
	}
	return []Event{failed}, nil
}

func cancel(s State, c Cancel, at time.Time) ([]Event, *Error) {
	cancelled := Cancelled{Reason: c.Reason, At: at}
	if err := s.follows(cancelled); err != nil {
		return nil, err
	}
	return []Event{cancelled}, nil
}

func ship(s State, c Ship, at time.Time) ([]Event, *Error) {
	wasShipped := s.TrackingNumber != ""
	shipped := Shipped{Carrier: c.Carrier, TrackingNumber: c.TrackingNumber, At: at}
	switch {
	case wasShipped && c.Carrier == s.Carrier && c.TrackingNumber == s.TrackingNumber:
		return nil, nil // the same shipment, reported again
	case wasShipped:
		return nil, errorf(KindInvalidTransition, "the order was shipped with %s, tracking number %s", s.Carrier, s.TrackingNumber)
	}
	if err := s.follows(shipped); err != nil {
		return nil, err
	}
	return []Event{shipped}, nil
}

func requestRefund(s State, c RequestRefund, at time.Time) ([]Event, *Error) {
	switch {
	case s.Status == StatusRefunding && c.RefundID == s.RefundID && c.Amount == s.PendingRefund,
		s.Status == StatusRefunded && c.RefundID == s.RefundID && c.Amount == s.Refunded:
		return nil, nil // this refund was already requested
	}
	requested := RefundRequested{RefundID: c.RefundID, Amount: c.Amount, At: at}
	if err := s.follows(requested); err != nil {
		return nil, err
	}
	if c.Amount.Currency != s.Currency {
		return nil, errorf(KindRejected, "refund is in %s, the order is in %s", c.Amount.Currency, s.Currency)
	}
	left, err := s.Paid.Sub(s.Refunded)
	if err != nil {
		return nil, &Error{Kind: KindRejected, Msg: "cannot compute the amount left to refund: " + err.Error(), Err: err}
	}
	if c.Amount.Amount > left.Amount {
		return nil, errorf(KindRejected, "refund of %s exceeds the %s paid and not refunded", c.Amount, left)
	}
	return []Event{requested}, nil
}

func completeRefund(s State, c CompleteRefund, at time.Time) ([]Event, *Error) {
	known := (s.Status == StatusRefunding || s.Status == StatusRefunded) && c.RefundID == s.RefundID
	amount := s.PendingRefund
	if s.Status == StatusRefunded {
		amount = s.Refunded
	}
	switch {
	case known && c.Amount != (Money{}) && c.Amount != amount:
		return nil, errorf(KindRejected, "refund %s is for %s, not %s", c.RefundID, amount, c.Amount)
	case s.Status == StatusRefunded && c.RefundID == s.RefundID:
		return nil, nil // the provider reported it again
	case (s.Status == StatusPaid || s.Status == StatusShipped) && c.Amount != (Money{}):
		// A refund made at the provider, which the order did not request: requested and
		// completed at once.
		events, err := requestRefund(s, RequestRefund(c), at)
		if err != nil {
			return nil, err
		}
		return append(events, RefundCompleted{RefundID: c.RefundID, Amount: c.Amount, At: at}), nil
	}
	completed := RefundCompleted{RefundID: c.RefundID, Amount: s.PendingRefund, At: at}
	if err := s.follows(completed); err != nil {
		return nil, err
	}
	return []Event{completed}, nil
}

// providerEvent decides a provider's report. What the order cannot take is recorded with the
// error that says why (see ProviderEvent).
func providerEvent(s State, c ProviderEvent, at time.Time) ([]Event, *Error) {
	if _, refund := c.Report.(CompleteRefund); refund && s.Status == StatusPaying {
		return nil, errorf(KindTooEarly, "the refund arrived before the success of payment %s, which is in progress", s.PaymentID)
	}
	if confirmed, ok := capturedAfterFailure(s, c.Report, at); ok {
		// A provider reports every attempt of one payment: a failure and a success of it, in
		// either order, leave the order paid.
		return []Event{confirmed}, nil
	}
	events, err := decide(s, c.Report, at)
	if err == nil || len(events) > 0 {
		return events, err
	}
	return []Event{ProviderEventUnapplied{Provider: c.Provider, EventID: c.EventID, Type: c.EventType, Reason: err.Msg, At: at}}, err
}

// capturedAfterFailure returns the confirmation of the payment whose failure ended the order's
// last payment, if report is a valid one for the total: follows takes it after that failure,
// with no other payment started since, where a client's ConfirmPayment records a charge.
func capturedAfterFailure(s State, report Command, at time.Time) (PaymentConfirmed, bool) {
	c, ok := report.(ConfirmPayment)
	confirmed := PaymentConfirmed{PaymentID: c.PaymentID, Amount: c.Amount, At: at}
	return confirmed, ok && s.Status == StatusCreated && c.validate() == nil && c.Amount == s.Total && s.follows(confirmed) == nil
}
