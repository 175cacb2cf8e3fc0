package order

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Status is where an order is in its life. The zero Status, StatusNone, is "no order yet".
type Status uint8

const (
	StatusNone      Status = iota // no event yet: the order does not exist
	StatusCreated                 // lines can be edited
	StatusPaying                  // a payment is in progress; lines are frozen
	StatusPaid                    // one payment is confirmed
	StatusShipped                 // paid and shipped
	StatusCancelled               // ended unpaid
	StatusRefunding               // a refund of a paid or shipped order is in progress
	StatusRefunded                // the refund is paid out; no further refund
)

var statusNames = [...]string{
	StatusNone:      "none",
	StatusCreated:   "created",
	StatusPaying:    "paying",
	StatusPaid:      "paid",
	StatusShipped:   "shipped",
	StatusCancelled: "cancelled",
	StatusRefunding: "refunding",
	StatusRefunded:  "refunded",
}

// String returns the status's stable lower-case name, such as "paying".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Line is one SKU of an order.
type Line struct {
	SKU       string
	Name      string // the product's name given when the line was added; "" if none
	Quantity  int64
	UnitPrice Money
}

// Charge is a payment the provider captured that the order did not accept; see
// DuplicateChargeRecorded.
type Charge struct {
	PaymentID string
	Amount    Money
	Reason    ChargeReason
	At        time.Time
}

// State is an order as folded from its events by Evolve.
//
// State is a value. Evolve returns a new State and never writes into the slices of the State
// it was given, so a State can be copied, kept (as the state at an earlier version, say) and
// evolved along two paths without one seeing the other's changes. Treat Lines as read-only.
type State struct {
	ID         string
	CustomerID string
	Currency   Currency
	ClientRef  string
	Channel    string // the sales channel; ChannelUnrecorded for orders created before channels
	Status     Status

	Lines []Line // in the order their SKUs were first added; nil when there are none
	Total Money  // the sum of quantity × unit price over Lines

	// PaymentID is the payment in progress (paying) or the confirmed payment (paid and after).
	// It is cleared when the payment fails, and kept when the order is cancelled while paying.
	PaymentID string
	// FailedPayment is the payment whose failure ended the last payment in progress, until
	// another starts: a provider may still report it captured (see ProviderEvent).
	FailedPayment string
	Paid          Money  // the confirmed payment's amount; zero before
	RefundID      string // the refund in progress or completed
	PendingRefund Money  // the amount of the refund in progress; zero otherwise
	Refunded      Money  // the amount paid back

	Carrier        string
	TrackingNumber string
	CancelReason   string

	// DuplicateCharges are payments to return to the customer, in the order they were
	// recorded. There is no bound on them: money the provider took is always recorded.
	DuplicateCharges Charges

	// Version is the number of events folded: 0 for no order, 1 after Created. The stream
	// revision of the last event folded is Version-1.
	Version int64

	CreatedAt time.Time // At of Created
	UpdatedAt time.Time // At of the last event folded
}

// Evolve returns s with e applied. It never fails, never validates and never panics: events
// are facts that Decide already checked, and a stream must always fold. An event Decide could
// not have produced still folds to some State (amounts that cannot be represented saturate at
// math.MaxInt64, so a corrupt stream never looks cheaper than it is); a nil event or a pointer
// to an event is not an event and leaves s unchanged.
func Evolve(s State, e Event) State {
	return evolve(s, e, false)
}

// evolve is Evolve; owned says that s.Lines is an array no other State shares, which a Folder
// knows, so that line events may change it in place instead of copying it.
func evolve(s State, e Event, owned bool) State {
	lines := func() []Line {
		if owned {
			return s.Lines
		}
		return slices.Clone(s.Lines)
	}
	switch e := e.(type) {
	case Created:
		s.ID, s.CustomerID, s.Currency, s.ClientRef, s.Channel = e.OrderID, e.CustomerID, e.Currency, e.ClientRef, e.Channel
		s.Status, s.CreatedAt = StatusCreated, e.At
		zero := Money{Currency: e.Currency}
		s.Paid, s.PendingRefund, s.Refunded = zero, zero, zero
		s = s.withLines(s.Lines, !owned)
	case LineAdded:
		l := Line{SKU: e.SKU, Name: e.Name, Quantity: e.Quantity, UnitPrice: e.UnitPrice}
		ls := lines()
		if i := s.lineIndex(e.SKU); i >= 0 {
			ls[i] = l
		} else {
			ls = append(ls, l)
		}
		s = s.withLines(ls, !owned)
	case LineQuantityChanged:
		if i := s.lineIndex(e.SKU); i >= 0 {
			ls := lines()
			ls[i].Quantity = e.Quantity
			s = s.withLines(ls, !owned)
		}
	case LineRemoved:
		s = s.withLines(slices.DeleteFunc(lines(), func(l Line) bool { return l.SKU == e.SKU }), !owned)
	case PaymentStarted:
		s.Status, s.PaymentID, s.FailedPayment = StatusPaying, e.PaymentID, ""
	case PaymentConfirmed:
		s.Status, s.PaymentID, s.Paid = StatusPaid, e.PaymentID, e.Amount
	case PaymentFailed:
		s.Status, s.PaymentID, s.FailedPayment = StatusCreated, "", e.PaymentID
	case Cancelled:
		s.Status, s.CancelReason = StatusCancelled, e.Reason
	case Shipped:
		s.Status, s.Carrier, s.TrackingNumber = StatusShipped, e.Carrier, e.TrackingNumber
	case RefundRequested:
		s.Status, s.RefundID, s.PendingRefund = StatusRefunding, e.RefundID, e.Amount
	case RefundCompleted:
		s.Status, s.RefundID = StatusRefunded, e.RefundID
		refunded, err := s.Refunded.Add(e.Amount)
		if err != nil {
			refunded = Money{Amount: math.MaxInt64, Currency: s.Currency}
		}
		s.Refunded, s.PendingRefund = refunded, Money{Currency: s.Currency}
	case DuplicateChargeRecorded:
		s.DuplicateCharges = s.DuplicateCharges.Add(Charge(e))
	case ProviderEventUnapplied: // recorded; the order is unchanged
	default:
		return s
	}
	s.Version++
	s.UpdatedAt = e.occurredAt()
	return s
}

// Folder folds events into a State like Evolve, but in place: Evolve copies an order's lines
// on every line event so that earlier States stay intact, which makes folding a long stream
// quadratic; a Folder copies them at most once after each call of State. The zero Folder
// starts from the zero State.
type Folder struct {
	state State
	owned bool // state.Lines is an array only the Folder holds
	stale bool // state.Total is not yet the sum of state.Lines
}

// Apply folds e.
func (f *Folder) Apply(e Event) {
	switch e.(type) {
	case LineAdded, LineQuantityChanged, LineRemoved:
		if !f.owned {
			f.state.Lines, f.owned = slices.Clone(f.state.Lines), true
		}
	}
	f.state = evolve(f.state, e, f.owned)
	// Line events recompute the total over every line; State does it once instead.
	f.stale = f.stale || f.owned
}

// Status returns the status folded so far, without the copy State makes.
func (f *Folder) Status() Status { return f.state.Status }

// State returns the State folded so far. The Folder copies the lines before changing them
// again, so the returned State stays as it is.
func (f *Folder) State() State {
	if f.stale {
		f.state, f.stale = f.state.withLines(f.state.Lines, true), false
	}
	f.owned = false
	return f.state
}

// withLines returns s with lines (which s must own) and, if total is set, their total.
func (s State) withLines(lines []Line, total bool) State {
	if len(lines) == 0 {
		lines = nil // one representation of "no lines", so states compare equal
	}
	s.Lines = lines
	if !total {
		return s
	}
	sum, err := linesTotal(lines, s.Currency)
	if err != nil {
		// Unreachable for decided events (see MaxAmount); a total that cannot be represented
		// saturates so that no payment can ever match it.
		sum = Money{Amount: math.MaxInt64, Currency: s.Currency}
	}
	s.Total = sum
	return s
}

func linesTotal(lines []Line, cur Currency) (Money, error) {
	total := Money{Currency: cur}
	for _, l := range lines {
		sub, err := l.UnitPrice.Mul(l.Quantity)
		if err != nil {
			return Money{}, err
		}
		if total, err = total.Add(sub); err != nil {
			return Money{}, err
		}
	}
	return total, nil
}

func (s State) lineIndex(sku string) int {
	return slices.IndexFunc(s.Lines, func(l Line) bool { return l.SKU == sku })
}

// paymentConfirmed reports whether the order has its one accepted payment.
func (s State) paymentConfirmed() bool {
	switch s.Status {
	case StatusPaid, StatusShipped, StatusRefunding, StatusRefunded:
		return true
	}
	return false
}
