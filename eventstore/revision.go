package eventstore

import (
	"cmp"
	"fmt"
	"math"
)

// End, as ReadStreamOptions.From, starts a backwards read at the last event of the stream.
const End uint64 = math.MaxUint64

// ExpectedRevision is the state a stream must be in for an append or a delete to go ahead.
// The zero value is Any.
type ExpectedRevision struct {
	kind     expectKind
	revision uint64
}

type expectKind uint8

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

var (
	// Any skips the check.
	Any = ExpectedRevision{kind: expectAny}
	// NoStream requires that the stream does not exist (or was deleted).
	NoStream = ExpectedRevision{kind: expectNoStream}
	// StreamExists requires that the stream exists and is not deleted.
	StreamExists = ExpectedRevision{kind: expectStreamExists}
)

// Exact requires that the last event of the stream has revision r.
func Exact(r uint64) ExpectedRevision {
	return ExpectedRevision{kind: expectExact, revision: r}
}

// IsAny reports whether e is Any.
func (e ExpectedRevision) IsAny() bool { return e.kind == expectAny }

// IsNoStream reports whether e is NoStream.
func (e ExpectedRevision) IsNoStream() bool { return e.kind == expectNoStream }

// IsStreamExists reports whether e is StreamExists.
func (e ExpectedRevision) IsStreamExists() bool { return e.kind == expectStreamExists }

// Matches reports whether e admits a stream that is live (written and not deleted) or not,
// with last revision last: what every backend checks before it appends or deletes.
func (e ExpectedRevision) Matches(live bool, last uint64) bool {
	switch e.kind {
	case expectAny:
		return true
	case expectNoStream:
		return !live
	case expectStreamExists:
		return live
	}
	return live && last == e.revision
}

// Revision returns the exact revision e expects, and false if e is not Exact.
func (e ExpectedRevision) Revision() (uint64, bool) {
	return e.revision, e.kind == expectExact
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectNoStream:
		return "no-stream"
	case expectStreamExists:
		return "stream-exists"
	case expectExact:
		return fmt.Sprint(e.revision)
	default:
		return "any"
	}
}

// Position is an event's place in the global log. It mirrors KurrentDB's commit and prepare
// positions; the embedded store sets both to the same sequence number. The zero Position comes
// before every event: no recorded event has it.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// Start is the position before the first event of the log.
var Start = Position{}

// Compare returns -1, 0 or +1 as p is before, equal to or after q in the log.
func (p Position) Compare(q Position) int {
	if c := cmp.Compare(p.Commit, q.Commit); c != 0 {
		return c
	}
	return cmp.Compare(p.Prepare, q.Prepare)
}

func (p Position) String() string { return fmt.Sprintf("%d/%d", p.Commit, p.Prepare) }
