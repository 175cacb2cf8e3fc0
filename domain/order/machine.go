package order

import "fmt"

// Follows returns nil if event e can follow an order in state s, and otherwise an error that
// says why not, which errors.Is matches with KindNotFound, KindAlreadyExists,
// KindInvalidTransition or KindRejected as Decide would refuse a command for the same reason.
//
// It is the order's state machine, and there is one: Decide refuses by it what an event could
// not follow, and every event Decide returns follows the state before it, so that an auditor
// that checks a stored stream with Follows, event by event, takes every stream Decide wrote.
// Decide refuses more than Follows does (amounts that differ from the total, a client's
// confirmation of a failed payment): those are the command's rules, not the log's. Follows
// looks at the status and the payment and refund an event names, never at amounts, whose
// sums an auditor checks over the whole fold.
func Follows(s State, e Event) error {
	if err := s.follows(e); err != nil {
		return fmt.Errorf("order: %s in state %s: %s (%w)", eventName(e), s.Status, err.Msg, err.Kind)
	}
	return nil
}

// Follows is Follows on the state folded so far, without the copy State makes: it reads no
// total, which is all a Folder leaves stale.
func (f *Folder) Follows(e Event) error { return Follows(f.state, e) }

// follows is Follows with an error for Decide to return as its own.
func (s State) follows(e Event) *Error {
	switch {
	case !known(e):
		return errorf(KindInvalid, "%s is not an order event; events are values", eventName(e))
	case s.Status == StatusNone:
		if _, created := e.(Created); !created {
			return errorf(KindNotFound, "the order does not exist")
		}
	}
	switch e := e.(type) {
	case Created:
		if s.Status != StatusNone {
			return errorf(KindAlreadyExists, "order %s already exists", s.ID)
		}
	case LineAdded, LineQuantityChanged, LineRemoved:
		return unless(s.Status == StatusCreated, KindInvalidTransition, "lines can only change while the order is %s, it is %s", StatusCreated, s.Status)
	case PaymentStarted:
		return unless(s.Status == StatusCreated, KindInvalidTransition, "a payment can only start while the order is %s, it is %s", StatusCreated, s.Status)
	case PaymentConfirmed:
		return s.confirms(e.PaymentID)
	case PaymentFailed:
		if s.Status != StatusPaying {
			return errorf(KindInvalidTransition, "no payment is in progress")
		}
		return s.inProgress(e.PaymentID)
	case Cancelled:
		return unless(s.Status == StatusCreated || s.Status == StatusPaying, KindInvalidTransition, "only a %s or %s order can be cancelled", StatusCreated, StatusPaying)
	case Shipped:
		return unless(s.Status == StatusPaid, KindInvalidTransition, "only a %s order can be shipped", StatusPaid)
	case RefundRequested:
		return unless(s.Status == StatusPaid || s.Status == StatusShipped, KindInvalidTransition, "only a %s or %s order can be refunded, once", StatusPaid, StatusShipped)
	case RefundCompleted:
		if s.Status != StatusRefunding {
			return errorf(KindInvalidTransition, "no refund is in progress")
		}
		if e.RefundID != s.RefundID {
			return errorf(KindRejected, "refund %s is in progress, not %s", s.RefundID, e.RefundID)
		}
	case DuplicateChargeRecorded:
		return s.unrecorded(e.PaymentID)
	}
	// ProviderEventUnapplied: what a provider reports is a fact in any state the order is in.
	return nil
}

// unless returns nil if ok, and otherwise the error of kind that format says. Its arguments
// are statuses, which box without allocating, since the verifier calls it for every event.
func unless(ok bool, k Kind, format string, args ...any) *Error {
	if ok {
		return nil
	}
	return errorf(k, format, args...)
}

// confirms is follows for the confirmation of payment id: the payment in progress, or the one
// whose failure ended the last payment, since a provider reports every attempt of a payment
// and a failure and a success of it, in either order, leave the order paid. A payment recorded
// as a duplicate charge is never the order's.
func (s State) confirms(id string) *Error {
	if err := s.unrecorded(id); err != nil {
		return err
	}
	switch {
	case s.Status == StatusCreated && s.FailedPayment != "" && id == s.FailedPayment:
		return nil
	case s.Status != StatusPaying:
		return errorf(KindInvalidTransition, "no payment is in progress")
	}
	return s.inProgress(id)
}

func (s State) inProgress(paymentID string) *Error {
	if paymentID != s.PaymentID {
		return errorf(KindRejected, "payment %s is in progress, not %s", s.PaymentID, paymentID)
	}
	return nil
}

// unrecorded refuses a payment already recorded as a duplicate charge: the charge is to be
// refunded once, so it is recorded once.
func (s State) unrecorded(paymentID string) *Error {
	if s.DuplicateCharges.Recorded(paymentID) {
		return errorf(KindRejected, "payment %s is already recorded as a duplicate charge to refund", paymentID)
	}
	return nil
}

// known reports whether e is one of this package's events, as a value.
func known(e Event) bool {
	switch e.(type) {
	case Created, LineAdded, LineQuantityChanged, LineRemoved, PaymentStarted, PaymentConfirmed, PaymentFailed,
		Cancelled, Shipped, RefundRequested, RefundCompleted, DuplicateChargeRecorded, ProviderEventUnapplied:
		return true
	}
	return false
}

// eventName names e in an error: its type name, or its Go type if it is no event.
func eventName(e Event) string {
	if known(e) {
		return e.EventType()
	}
	return fmt.Sprintf("%T", e)
}
