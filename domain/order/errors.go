package order

import (
	"fmt"

	"github.com/acme/orders/fault"
)

// Kind classifies every error Decide returns. The set is small and closed on purpose: the HTTP
// layer maps each kind to one status and one problem type, and that mapping must not change
// whenever a business rule is added. The rule that was broken is in Error.Msg.
//
// A Kind is also an error, so that errors.Is(err, order.KindNotFound) works.
type Kind uint8

const (
	_ Kind = iota // the zero Kind is not a kind: an unset Kind is a bug, not a category

	// KindInvalid: the command is malformed on its own, whatever the order's state: a missing
	// id, a quantity out of range, a currency that is not a code. (HTTP 400.)
	KindInvalid
	// KindNotFound: the order does not exist, or the line the command names is not in it.
	// (HTTP 404.)
	KindNotFound
	// KindAlreadyExists: CreateOrder on an order that already exists. (HTTP 409.)
	KindAlreadyExists
	// KindInvalidTransition: the order's status does not allow the command, e.g. Ship on a
	// created order. Error.State and Error.Command name both. (HTTP 409.)
	KindInvalidTransition
	// KindRejected: the status allows the command but the order's facts contradict it: an
	// amount that differs from the total, a second payment for a paid order, a price that
	// differs from the line's, a refund larger than what is left. (HTTP 422.)
	KindRejected
	// KindTooEarly: the order is not yet where the command applies, and a retry may find it
	// there: a provider's refund that arrived before the success of the payment it refunds.
	// (HTTP 409, with Retry-After.)
	KindTooEarly
)

var kindCodes = [...]string{
	KindInvalid:           "invalid",
	KindNotFound:          "not-found",
	KindAlreadyExists:     "already-exists",
	KindInvalidTransition: "invalid-transition",
	KindRejected:          "rejected",
	KindTooEarly:          "too-early",
}

// String returns the kind's stable code, such as "invalid-transition", fit for the last
// segment of a problem+json type URI. Codes never change once published.
func (k Kind) String() string {
	if int(k) < len(kindCodes) && kindCodes[k] != "" {
		return kindCodes[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error makes a Kind usable as an errors.Is target. It returns the code, like String, because
// fmt prefers Error to String: "%s" of a Kind must print the code either way.
func (k Kind) Error() string { return k.String() }

// Error is the error Decide returns. Match it with errors.As, or its kind with
// errors.Is(err, KindX).
type Error struct {
	Kind    Kind
	State   Status // the order's status when the command was decided; StatusNone if it did not exist
	Command string // the command's CommandName
	Msg     string // what is wrong, for people (a problem's detail); wording may change
	Err     error  // the underlying cause, if any, such as ErrOverflow
}

func (e *Error) Error() string {
	return fmt.Sprintf("order: %s in state %s: %s (%s)", e.Command, e.State, e.Msg, e.Kind)
}

// Is reports whether target is e's Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// Unwrap returns the cause, if any, and the service's kind of e's Kind (package fault).
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if int(e.Kind) < len(faults) && faults[e.Kind] != nil {
		errs = append(errs, faults[e.Kind])
	}
	return errs
}

// faults are the service's kinds of each Kind, with the problem code the API names it by. A
// command the order's status or facts refuse is refused for good, whatever its status.
var faults = [...]error{
	KindInvalid:           fault.New(fault.Invalid, "invalid-command", "invalid command"),
	KindNotFound:          fault.New(fault.NotFound, "", "not found"),
	KindAlreadyExists:     fault.New(fault.Rejected, "invalid-transition", "already exists"),
	KindInvalidTransition: fault.New(fault.Rejected, "invalid-transition", "invalid transition"),
	KindRejected:          fault.New(fault.Rejected, "", "rejected"),
	KindTooEarly:          fault.New(fault.Conflict, "too-early", "too early"),
}

// errorf builds the errors of this package without State and Command: Decide fills those in
// once, for every error, so no rule can forget them.
func errorf(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}
