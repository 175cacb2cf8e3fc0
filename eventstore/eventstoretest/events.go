package eventstoretest

import (
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"
)

// NewEvents returns n events with random ids, the type "test.event.v1" and small JSON data
// that numbers them from 0.
func NewEvents(n int) []eventstore.EventData {
	events := make([]eventstore.EventData, n)
	for i := range events {
		events[i] = eventstore.EventData{
			ID:   uuid.New(),
			Type: "test.event.v1",
			Data: fmt.Appendf(nil, `{"n":%d}`, i),
		}
	}
	return events
}

// MustAppend appends events to stream and fails the test if that fails.
func MustAppend(tb testing.TB, s eventstore.Store, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) eventstore.AppendResult {
	tb.Helper()
	res, err := s.Append(tb.Context(), stream, expected, events...)
	if err != nil {
		tb.Fatalf("append %d events to %q at %v: %v", len(events), stream, expected, err)
	}
	return res
}

// StreamLen is how many events stream holds: 0 for a missing stream. It fails the test if the
// read fails.
func StreamLen(tb testing.TB, s eventstore.Store, stream string) int {
	tb.Helper()
	events, err := Collect(s.ReadStream(tb.Context(), stream, eventstore.ReadStreamOptions{}))
	if err != nil && !errors.Is(err, eventstore.ErrStreamNotFound) {
		tb.Fatalf("read %q: %v", stream, err)
	}
	return len(events)
}

// Collect reads seq to its end and returns the events it yielded and the error that ended it.
func Collect(seq iter.Seq2[eventstore.RecordedEvent, error]) ([]eventstore.RecordedEvent, error) {
	var events []eventstore.RecordedEvent
	for e, err := range seq {
		if err != nil {
			return events, err
		}
		events = append(events, e)
	}
	return events, nil
}

// collect is Collect that also checks that an error ends the sequence.
func collect(t *testing.T, seq iter.Seq2[eventstore.RecordedEvent, error]) ([]eventstore.RecordedEvent, error) {
	t.Helper()
	var (
		events []eventstore.RecordedEvent
		end    error
		after  int
	)
	for e, err := range seq {
		switch {
		case end != nil:
			after++
		case err != nil:
			end = err
		default:
			events = append(events, e)
		}
		if after == 3 {
			break
		}
	}
	if after > 0 {
		t.Errorf("the sequence went on after yielding the error %q; an error must end it", end)
	}
	return events, end
}

func (f *fixture) append(t *testing.T, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	res := MustAppend(t, f.b, stream, expected, events...)
	wantFate(t, "a new append", res, eventstore.FateWritten)
	return res
}

// wantFate fails the test if res reports a fate other than want: a store need not tell
// (FateUnknown), but one that does must be right.
func wantFate(t *testing.T, what string, res eventstore.AppendResult, want eventstore.Fate) {
	t.Helper()
	if res.Fate != want && res.Fate != eventstore.FateUnknown {
		t.Errorf("%s: AppendResult.Fate = %d, want %d or unknown (%d)", what, res.Fate, want, eventstore.FateUnknown)
	}
}

// read reads a stream and fails the test on error.
func (f *fixture) read(t *testing.T, stream string, opts eventstore.ReadStreamOptions) []eventstore.RecordedEvent {
	t.Helper()
	events, err := collect(t, f.b.ReadStream(t.Context(), stream, opts))
	if err != nil {
		t.Fatalf("read %q %+v: %v", stream, opts, err)
	}
	return events
}

// log reads the test's own part of the global log from the start.
func (f *fixture) log(t *testing.T) []eventstore.RecordedEvent {
	t.Helper()
	events, err := collect(t, f.b.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: f.own()}))
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
	return events
}

// wantStream checks that stream holds exactly events, at revisions from first on.
func (f *fixture) wantStream(t *testing.T, stream string, first uint64, events ...eventstore.EventData) {
	t.Helper()
	got := refsOf(f.read(t, stream, eventstore.ReadStreamOptions{}))
	if diff := cmp.Diff(refsFor(stream, first, events...), got); diff != "" {
		t.Errorf("stream %q (-want +got):\n%s", stream, diff)
	}
}

// wantNotFound checks that reading stream yields one ErrStreamNotFound and nothing else.
func (f *fixture) wantNotFound(t *testing.T, stream string) {
	t.Helper()
	wantNotFound(t, f.b, stream, eventstore.ReadStreamOptions{})
}

func wantNotFound(t *testing.T, b Backend, stream string, opts eventstore.ReadStreamOptions) {
	t.Helper()
	events, err := collect(t, b.ReadStream(t.Context(), stream, opts))
	if len(events) > 0 {
		t.Errorf("read %q %+v yielded %d events, want none", stream, opts, len(events))
	}
	if !errors.Is(err, eventstore.ErrStreamNotFound) {
		t.Errorf("read %q %+v: error = %v, want one matching ErrStreamNotFound", stream, opts, err)
	}
}

// wantAbsent checks that none of events is in the test's part of the global log.
func (f *fixture) wantAbsent(t *testing.T, events ...eventstore.EventData) {
	t.Helper()
	stored := make(map[uuid.UUID]string)
	for _, e := range f.log(t) {
		stored[e.ID] = e.Stream
	}
	for _, e := range events {
		if stream, ok := stored[e.ID]; ok {
			t.Errorf("event %s was written to %q by a call that failed", e.ID, stream)
		}
	}
}

// wantWrongExpected checks that err is a wrong-expected-revision error with these fields. It
// reports with t.Errorf only, so writers on other goroutines can call it.
func wantWrongExpected(t *testing.T, err error, stream string, expected, actual eventstore.ExpectedRevision) {
	t.Helper()
	if !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Errorf("append/delete %q at %v: error = %v, want one matching ErrWrongExpectedRevision", stream, expected, err)
	}
	var wer *eventstore.WrongExpectedRevisionError
	if !errors.As(err, &wer) {
		t.Errorf("append/delete %q at %v: error = %v, want a *WrongExpectedRevisionError", stream, expected, err)
		return
	}
	if wer.Stream != stream || wer.Expected != expected || wer.Actual != actual {
		t.Errorf("WrongExpectedRevisionError{Stream: %q, Expected: %v, Actual: %v}, want {Stream: %q, Expected: %v, Actual: %v}",
			wer.Stream, wer.Expected, wer.Actual, stream, expected, actual)
	}
}

// ref identifies a recorded event in comparisons: which event, where.
type ref struct {
	Stream   string
	Revision uint64
	ID       string
}

func refsOf(events []eventstore.RecordedEvent) []ref {
	refs := make([]ref, len(events))
	for i, e := range events {
		refs[i] = ref{e.Stream, e.Revision, e.ID.String()}
	}
	return refs
}

// refsFor is where appending events to stream puts them, the first at revision first.
func refsFor(stream string, first uint64, events ...eventstore.EventData) []ref {
	refs := make([]ref, len(events))
	for i, e := range events {
		refs[i] = ref{stream, first + uint64(i), e.ID.String()}
	}
	return refs
}

// equalRecorded compares recorded events field by field; empty and nil metadata are equal.
var equalRecorded = cmpopts.EquateEmpty()

// wantIncreasing checks that positions strictly increase and that none is Start.
func wantIncreasing(t *testing.T, what string, events []eventstore.RecordedEvent) {
	t.Helper()
	for i, e := range events {
		if e.Position.Compare(eventstore.Start) <= 0 {
			t.Errorf("%s: event %d (%s@%d) has position %v, want one after Start", what, i, e.Stream, e.Revision, e.Position)
		}
		if i > 0 && e.Position.Compare(events[i-1].Position) <= 0 {
			t.Errorf("%s: event %d (%s@%d) has position %v, not after the previous one's %v",
				what, i, e.Stream, e.Revision, e.Position, events[i-1].Position)
		}
	}
}

// revisions returns the revisions from..to inclusive, counting down if to < from.
func revisions(from, to uint64) []uint64 {
	var rs []uint64
	if from <= to {
		for r := from; r <= to; r++ {
			rs = append(rs, r)
		}
		return rs
	}
	for r := from; ; r-- {
		rs = append(rs, r)
		if r == to {
			return rs
		}
	}
}

// pick returns the refs of stream's events at the given revisions, the first at revision 0.
func pick(stream string, events []eventstore.EventData, revs []uint64) []ref {
	all := refsFor(stream, 0, events...)
	refs := make([]ref, 0, len(revs))
	for _, r := range revs {
		refs = append(refs, all[r])
	}
	return refs
}
