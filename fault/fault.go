// Package fault is the closed set of error kinds that every package of the service wraps its
// errors into at its edge, with what a kind means to whoever answers it: the problem code the
// API names it by and whether an answer of that kind is final, kept for its key's replays.
//
// A package declares its errors with New, or wraps a kind with %w; callers match a kind with
// errors.Is (errors.Is(err, fault.NotFound)) and a package's own error the same way. Of, Code
// and Final read a kind from this one table, so that the problem mapping, the console's pages
// and the metrics' labels cannot disagree.
package fault

import "errors"

// Kind is a kind of error: what a caller can do about it.
type Kind struct {
	name  string
	code  string // the problem code of errors of the kind that name none of their own
	final bool   // an answer of the kind is the command's for good: kept for its key's replays
}

// Error makes a Kind an error, to wrap with %w and to match with errors.Is.
func (k *Kind) Error() string { return k.name }

// The kinds. A kind that is not final depends on a passing condition of the server or of
// the order: a retry may go otherwise, so its answer is not kept for the key.
var (
	Invalid            = &Kind{name: "invalid request", code: "malformed-request", final: true}
	Unauthorized       = &Kind{name: "unauthorized", code: "unauthorized", final: true}
	Forbidden          = &Kind{name: "forbidden", code: "forbidden", final: true}
	NotFound           = &Kind{name: "not found", code: "not-found", final: true}
	Rejected           = &Kind{name: "refused by the order's rules", code: "command-rejected", final: true}
	PreconditionFailed = &Kind{name: "precondition failed", code: "precondition-failed", final: true}
	KeyReused          = &Kind{name: "Idempotency-Key was already used for a different request", code: "idempotency-key-reused", final: true}
	TooLarge           = &Kind{name: "too large", code: "payload-too-large", final: true}
	InFlight           = &Kind{name: "a request with this Idempotency-Key is still in progress", code: "idempotency-key-in-flight"}
	Conflict           = &Kind{name: "changed concurrently", code: "concurrent-modification"}
	Unreadable         = &Kind{name: "unreadable event", code: "event-unreadable"}
	Unavailable        = &Kind{name: "unavailable", code: "unavailable"}
)

// kinds are every kind, in the order Of looks for them.
var kinds = []*Kind{Invalid, Unauthorized, Forbidden, NotFound, Rejected, PreconditionFailed, KeyReused, TooLarge, InFlight, Conflict, Unreadable, Unavailable}

// coded is an error of a kind that names itself finer than its kind: a code and a message of
// its own.
type coded struct {
	kind      *Kind
	code, msg string
}

func (e *coded) Error() string { return e.msg }
func (e *coded) Unwrap() error { return e.kind }

// New returns an error of kind k with message msg and problem code code, or the kind's code
// if code is "". Declare a package's errors with it; each call returns a distinct error.
func New(k *Kind, code, msg string) error {
	if code == "" {
		code = k.code
	}
	return &coded{kind: k, code: code, msg: msg}
}

// Of returns the kind of err, or nil for an error of no kind: an internal error.
func Of(err error) *Kind {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}

// Code returns the problem code of err: its own if it was made by New, else its kind's; "" for
// an error of no kind.
func Code(err error) string {
	if c, ok := errors.AsType[*coded](err); ok {
		return c.code
	}
	if k := Of(err); k != nil {
		return k.code
	}
	return ""
}

// Final reports whether an answer with err is the command's for good, to keep for its key's
// replays: no error, or one of a final kind.
func Final(err error) bool {
	if err == nil {
		return true
	}
	k := Of(err)
	return k != nil && k.final
}
