package eventstore

import (
	"errors"
	"fmt"

	"github.com/acme/orders/fault"
)

var (
	// ErrWrongExpectedRevision matches every *WrongExpectedRevisionError.
	ErrWrongExpectedRevision = errors.New("wrong expected revision")
	// ErrStreamNotFound: the stream does not exist or was deleted.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrInvalidArgument: the call's arguments are wrong (empty stream name, empty type,
	// data that is not JSON, …). Retrying the same call cannot succeed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrDuplicateEventID: an event id is already stored, and not as an idempotent repeat.
	ErrDuplicateEventID = errors.New("duplicate event id")
	// ErrUnavailable: the store cannot serve the call now (disk full, unwritable, server
	// unreachable). Nothing was written; the call may succeed later.
	ErrUnavailable = fault.New(fault.Unavailable, "", "event store unavailable")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("event store closed")
)

// WrongExpectedRevisionError reports an append or delete whose expected revision did not match.
type WrongExpectedRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	// Actual is the stream's state: NoStream, or Exact(revision of its last event).
	Actual ExpectedRevision
}

func (e *WrongExpectedRevisionError) Error() string {
	return fmt.Sprintf("stream %q: expected revision %v, actual %v", e.Stream, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrWrongExpectedRevision) true.
func (e *WrongExpectedRevisionError) Is(target error) bool {
	return target == ErrWrongExpectedRevision
}
