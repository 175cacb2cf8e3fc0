package postgres

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// batch decides the requests of one transaction in memory, against the rows that the
// transaction read once it held the write lock, and collects what to write. Each request sees
// the effects of those decided before it; a request that is refused changes nothing, so it
// never fails the others.
type batch struct {
	// head is the position of the last event assigned; read is the head as the transaction
	// found it.
	head, read int64
	// streams holds the row of every stream the requests name, as the requests before left
	// it; the zero row is a stream never written. changed names the rows to write.
	streams map[string]streamRow
	changed map[string]struct{}
	// ids locates the requests' event ids that are stored, or written by a request before.
	ids map[uuid.UUID]eventRef
	// gone maps a stream deleted, truncated or expired to the revision below which its stored
	// events are deleted; deletes counts the streams deleted, and expired those expired that
	// the transaction forgets (see forgetExpired and expireQuery).
	gone             map[string]int64
	deletes, expired int
	// expiredByLook is how many expired streams expireQuery forgot.
	expiredByLook int
	// inserts are the events to write, in position order.
	inserts []newEvent
}

// streamRow is a stream's row; exists is false for a stream never written.
type streamRow struct {
	exists        bool
	deleted       bool
	firstRevision int64 // of the current life
	lastRevision  int64 // of the last event ever written
	// expired says that the stream was past its maximum age when the transaction read it (see
	// forgetExpired). maxAge is the maximum age an append sets, in microseconds; 0 keeps the
	// row's.
	expired bool
	maxAge  int64
}

func (sr streamRow) live() bool { return sr.exists && !sr.deleted }

// actual is the stream's state as a wrong-expected-revision error reports it.
func (sr streamRow) actual() eventstore.ExpectedRevision {
	if !sr.live() {
		return eventstore.NoStream
	}
	return eventstore.Exact(uint64(sr.lastRevision))
}

// eventRef locates a stored event.
type eventRef struct {
	stream             string
	revision, position int64
}

// newEvent is an event to insert.
type newEvent struct {
	eventRef
	data *eventstore.EventData
}

func newBatch() *batch {
	return &batch{
		streams: map[string]streamRow{},
		changed: map[string]struct{}{},
		ids:     map[uuid.UUID]eventRef{},
		gone:    map[string]int64{},
	}
}

// keys returns the streams and the event ids that requests name, for the transaction to read.
// The ids are arrays, which pgx encodes as PostgreSQL's uuid at once: a uuid.UUID it encodes as
// a driver.Valuer, by reflection, into text for the server to parse (8% of the service's
// processor time under keyed creates).
func keys(requests []*request) (streams []string, ids [][16]byte) {
	seen := map[string]struct{}{}
	add := func(stream string) {
		if _, ok := seen[stream]; !ok {
			seen[stream] = struct{}{}
			streams = append(streams, stream)
		}
	}
	for _, r := range requests {
		if r.Appends == nil {
			add(r.Stream)
		}
		for _, a := range r.Appends {
			add(a.Stream)
			for _, e := range a.Events {
				ids = append(ids, e.ID)
			}
		}
	}
	return streams, ids
}

// forgetExpired makes each stream of the batch that had expired when the transaction read it a
// deleted one, as expireQuery does to the streams that no request names: its events are
// deleted and its row is kept as deleted since it expired. It reads as not found and takes
// appends as a deleted stream either way, and the requests then meet no other kind of stream
// than missing, live and deleted ones.
func (b *batch) forgetExpired() {
	for name, sr := range b.streams {
		if !sr.expired {
			continue
		}
		b.drop(name, sr.lastRevision+1)
		sr.deleted, sr.expired = true, false
		b.setStream(name, sr)
		b.expired++
	}
}

// apply decides r and sets its outcome.
func (b *batch) apply(r *request) {
	switch {
	case r.Truncate:
		r.Err = b.truncate(r.Stream, r.Before)
	case r.Appends == nil:
		r.Err = b.delete(r.Stream, r.Expected)
	default:
		r.Results, r.Err = b.appendAll(r.Appends)
	}
}

// appendAll makes appends all or nothing: every one is checked (expected revision, then
// event ids) before any is written.
func (b *batch) appendAll(appends []eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	results := make([]eventstore.AppendResult, len(appends))
	for i, a := range appends {
		var err error
		if results[i], err = b.plan(a.Stream, a.Expected, a.Events); err != nil {
			return nil, err
		}
	}
	if i := eventstore.PartialRepeat(results); i >= 0 {
		a := appends[i]
		return nil, &eventstore.WrongExpectedRevisionError{Stream: a.Stream, Expected: a.Expected, Actual: b.streams[a.Stream].actual()}
	}
	for i, a := range appends {
		if results[i].Fate == eventstore.FateRepeated {
			continue
		}
		for _, e := range a.Events {
			if _, stored := b.ids[e.ID]; stored {
				return nil, fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, e.ID)
			}
		}
	}
	for i, a := range appends {
		if results[i].Fate != eventstore.FateRepeated {
			results[i] = b.write(a)
		}
	}
	return results, nil
}

// plan decides an append without writing: it returns the result of the earlier append that
// events repeat (FateRepeated), or a zero result for events to write, or why they cannot be
// appended.
func (b *batch) plan(stream string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (eventstore.AppendResult, error) {
	sr := b.streams[stream]
	if !expected.Matches(sr.live(), uint64(sr.lastRevision)) {
		wrong := &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: sr.actual()}
		// A repeat of an exact append finds its events right after the revision it expected.
		rev, exact := expected.Revision()
		from := rev + 1
		if expected.IsNoStream() {
			from, exact = uint64(sr.firstRevision), true
		}
		if !exact || !sr.live() || rev == math.MaxUint64 || from > uint64(sr.lastRevision) {
			return eventstore.AppendResult{}, wrong
		}
		if res, ok := b.repeated(stream, int64(from), events); ok {
			return res, nil
		}
		return eventstore.AppendResult{}, wrong
	}
	if expected.IsAny() || expected.IsStreamExists() {
		// Without an exact revision, a repeat is found by its first event id.
		if ref, ok := b.ids[events[0].ID]; ok {
			if res, ok := b.repeated(stream, ref.revision, events); ok {
				return res, nil
			}
			return eventstore.AppendResult{}, fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, events[0].ID)
		}
	}
	return eventstore.AppendResult{}, nil
}

// repeated reports whether the stream holds exactly events, in order, from revision from, and
// if so the result of the append that wrote them.
func (b *batch) repeated(stream string, from int64, events []eventstore.EventData) (eventstore.AppendResult, bool) {
	var last eventRef
	for i, e := range events {
		ref, ok := b.ids[e.ID]
		if !ok || ref.stream != stream || ref.revision != from+int64(i) {
			return eventstore.AppendResult{}, false
		}
		last = ref
	}
	return eventstore.AppendResult{Revision: uint64(last.revision), Position: position(last.position), Fate: eventstore.FateRepeated}, true
}

// write appends a's events after the stream's last revision, creating or reviving the stream,
// with a's maximum age if it has one.
func (b *batch) write(a eventstore.StreamAppend) eventstore.AppendResult {
	stream, events := a.Stream, a.Events
	sr := b.streams[stream]
	first := int64(0)
	if sr.exists {
		first = sr.lastRevision + 1
	}
	if !sr.live() {
		sr = streamRow{exists: true, firstRevision: first}
	}
	if a.MaxAge > 0 {
		// Rounded up: an age of 1 ns must still expire the stream, not leave it without one.
		sr.maxAge = int64((min(a.MaxAge, math.MaxInt64-time.Microsecond) + time.Microsecond - 1) / time.Microsecond)
	}
	for i := range events {
		b.head++
		ref := eventRef{stream: stream, revision: first + int64(i), position: b.head}
		b.inserts = append(b.inserts, newEvent{eventRef: ref, data: &events[i]})
		b.ids[events[i].ID] = ref
	}
	sr.lastRevision = first + int64(len(events)) - 1
	b.setStream(stream, sr)
	return eventstore.AppendResult{Revision: uint64(sr.lastRevision), Position: position(b.head), Fate: eventstore.FateWritten}
}

func (b *batch) delete(stream string, expected eventstore.ExpectedRevision) error {
	sr := b.streams[stream]
	if !expected.Matches(sr.live(), uint64(sr.lastRevision)) {
		return &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: sr.actual()}
	}
	if !sr.live() {
		return nil // Any or NoStream on a missing stream: nothing to do
	}
	b.drop(stream, sr.lastRevision+1)
	sr.deleted = true
	b.setStream(stream, sr)
	b.deletes++
	return nil
}

// truncate removes the events of stream before revision before.
func (b *batch) truncate(stream string, before uint64) error {
	sr := b.streams[stream]
	switch {
	case !sr.live():
		return fmt.Errorf("%w: %s", eventstore.ErrStreamNotFound, stream)
	case before > uint64(sr.lastRevision):
		return fmt.Errorf("%w: truncate %s before %d, past its last revision %d", eventstore.ErrInvalidArgument, stream, before, sr.lastRevision)
	}
	b.drop(stream, int64(before))
	return nil
}

// drop removes the events of stream below revision below: those stored, by a DELETE before
// the inserts, and those that requests before wrote, from the inserts. Either way their ids
// are free again.
func (b *batch) drop(stream string, below int64) {
	b.gone[stream] = max(b.gone[stream], below)
	maps.DeleteFunc(b.ids, func(_ uuid.UUID, ref eventRef) bool {
		return ref.stream == stream && ref.revision < below
	})
	kept := b.inserts[:0]
	for _, e := range b.inserts {
		if e.stream != stream || e.revision >= below {
			kept = append(kept, e)
		}
	}
	clear(b.inserts[len(kept):])
	b.inserts = kept
}

func (b *batch) setStream(stream string, sr streamRow) {
	b.streams[stream] = sr
	b.changed[stream] = struct{}{}
}
