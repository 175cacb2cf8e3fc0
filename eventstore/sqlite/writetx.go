package sqlite

import (
	"bytes"
	"cmp"
	"database/sql/driver"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/acme/orders/eventstore"
)

// answerRefusals answers, before the commit, each refusal of a stream that the transaction
// leaves as it was: the refusal rests on committed events alone, and holds whatever becomes
// of the transaction. A refusal of a stream the transaction wrote waits for the commit: its
// Actual names a revision that is durable only then, and a read before then still finds the
// revision the loser expected, with which it would only lose again.
func (w *writeTx) answerRefusals(pending []*request) {
	for _, r := range pending {
		if wrong, ok := r.Err.(*eventstore.WrongExpectedRevisionError); ok {
			if _, changed := w.undo[wrong.Stream]; !changed {
				r.Answer()
			}
		}
	}
}

// writeTx applies requests inside the writer's transaction.
type writeTx struct {
	tx   driver.Tx
	conn *writeConn
	now  int64
	// forgetBefore: the rows of streams deleted before it are forgotten (Config.KeepDeleted).
	forgetBefore int64

	// streams caches stream rows across transactions; only the writer touches it, so it is
	// the truth for every stream it holds. undo keeps the entries this transaction changed,
	// as they were, to restore them if it rolls back.
	streams map[string]streamRow
	undo    map[string]cachedRow

	// written and gone are what the transaction did, for the tail once it commits: gone maps
	// a stream deleted or truncated to the revision before which its events are gone
	// (math.MaxUint64: all). bytes holds the written events' data and metadata: one array for
	// the transaction, which only grows within its capacity, so that what the tail hands out
	// is never written over.
	written []eventstore.RecordedEvent
	gone    map[string]uint64
	bytes   []byte
}

// cachedRow is a stream's entry in the writer's cache, or its absence.
type cachedRow struct {
	row    streamRow
	cached bool
}

// streamRow is a stream's row; id 0 means the stream was never written.
type streamRow struct {
	id            int64
	revision      uint64 // of the last event ever written
	firstRevision uint64 // of the current life
	deleted       bool
	// maxAge is the stream's maximum age in nanoseconds, 0 for none. expiresAt, while the
	// stream is live with one, is when its last event is past it (Unix nanoseconds), else 0.
	maxAge, expiresAt int64
}

// live reports whether the stream is written and not deleted. The writer makes a stream that
// expired a deleted one as soon as it reads its row (see writeTx.stream).
func (sr streamRow) live() bool { return sr.id != 0 && !sr.deleted }

// expired reports whether the stream is past its maximum age at now: every event is.
func (sr streamRow) expired(now int64) bool { return sr.expiresAt != 0 && sr.expiresAt <= now }

// expiry is when a stream whose last event was recorded at now expires with maximum age
// maxAge, or 0 for none; the far future for an age past the end of int64.
func expiry(now, maxAge int64) int64 {
	if maxAge <= 0 {
		return 0
	}
	return now + min(maxAge, math.MaxInt64-now)
}

// nullable is v for the database, or NULL for 0.
func nullable(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// actual is the stream's state as a wrong-expected-revision error reports it.
func (sr streamRow) actual() eventstore.ExpectedRevision {
	if !sr.live() {
		return eventstore.NoStream
	}
	return eventstore.Exact(sr.revision)
}

// stream returns the stream's row, cached or read. A stream found expired is made a deleted
// one first (see expire): the writer then knows only missing, live and deleted streams.
func (w *writeTx) stream(name string) (streamRow, error) {
	sr, ok := w.streams[name]
	if !ok {
		rows, err := w.conn.stream.query(name)
		if err != nil {
			return streamRow{}, err
		}
		if len(rows) == 1 {
			row := rows[0]
			sr = streamRow{id: asInt(row[0]), firstRevision: uint64(asInt(row[1])), revision: uint64(asInt(row[2])),
				deleted: asInt(row[3]) != 0, maxAge: asInt(row[5]), expiresAt: asInt(row[6])}
			if last, ok := row[4].(int64); ok && !sr.deleted {
				sr.revision = uint64(last)
			}
		}
		w.streams[name] = sr
	}
	if sr.expired(w.now) {
		return w.expire(name, sr)
	}
	return sr, nil
}

// setStream records the stream's new state, keeping the old one for rollback.
func (w *writeTx) setStream(name string, sr streamRow) {
	if _, ok := w.undo[name]; !ok {
		old, cached := w.streams[name]
		w.undo[name] = cachedRow{old, cached}
	}
	w.streams[name] = sr
}

// rollback undoes the transaction, in the database and in the stream cache.
func (w *writeTx) rollback() {
	w.tx.Rollback()
	for name, old := range w.undo {
		if old.cached {
			w.streams[name] = old.row
		} else {
			delete(w.streams, name)
		}
	}
}

// appendAll makes appends all or nothing. Every one is checked before any event is written, so
// that a refusal leaves the transaction as it was; a failed write aborts it. A stream created
// with NoStream that the writer has not cached is claimed by its row's INSERT in the check
// itself (see claim): a refusal of a later append deletes the rows claimed before it.
func (w *writeTx) appendAll(appends []eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	results := make([]eventstore.AppendResult, len(appends))
	// The rows of a keyed command's few streams stay on the stack: the compiler keeps a slice
	// made of a length it cannot see there only up to 32 bytes, less than one row.
	var few [4]streamRow
	rows := few[:min(len(appends), len(few))]
	if len(appends) > len(few) {
		rows = make([]streamRow, len(appends))
	}
	claimed := make([]bool, len(appends))
	for i, a := range appends {
		var err error
		if rows[i], claimed[i], err = w.claim(a); err == nil && !claimed[i] {
			rows[i], results[i], err = w.plan(a.Stream, rows[i], a.Expected, a.Events)
		}
		if err != nil {
			return nil, w.unclaim(rows[:i], claimed[:i], err)
		}
	}
	if i := eventstore.PartialRepeat(results); i >= 0 {
		a := appends[i]
		return nil, w.unclaim(rows, claimed, &eventstore.WrongExpectedRevisionError{Stream: a.Stream, Expected: a.Expected, Actual: rows[i].actual()})
	}
	for i, a := range appends {
		if results[i].Fate == eventstore.FateRepeated {
			continue
		}
		var err error
		if results[i], err = w.write(a, rows[i], claimed[i]); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// claim returns the row of a's stream: the cached one, or for an append with expected NoStream
// to a stream the writer has not cached, one it inserts for a's events, with a's maximum age,
// unless the name has a row already (then it reads that row, as for any other append). A new
// stream so costs one statement instead of a SELECT that finds nothing and the INSERT. claimed
// says that the row is the inserted one, for a's events from revision 0.
func (w *writeTx) claim(a eventstore.StreamAppend) (sr streamRow, claimed bool, err error) {
	if _, cached := w.streams[a.Stream]; cached || !a.Expected.IsNoStream() {
		sr, err = w.stream(a.Stream)
		return sr, false, err
	}
	last, maxAge := len(a.Events)-1, int64(a.MaxAge)
	expiresAt := expiry(w.now, maxAge)
	res, err := w.conn.exec(w.conn.claimStream, a.Stream, last, nullable(maxAge), nullable(expiresAt))
	if err != nil {
		return streamRow{}, false, err
	}
	if inserted, err := res.RowsAffected(); err != nil || inserted == 0 {
		if err == nil {
			sr, err = w.stream(a.Stream) // the name has a row: a live stream, or a deleted one
		}
		return sr, false, err
	}
	if sr.id, err = res.LastInsertId(); err != nil {
		return streamRow{}, false, errAbort{err}
	}
	sr.revision, sr.maxAge, sr.expiresAt = uint64(last), maxAge, expiresAt
	return sr, true, nil
}

// unclaim deletes the rows that claim inserted for appends checked before one that is not made
// for err, and returns err; if it cannot, the request aborts (see errAbort) with err.
func (w *writeTx) unclaim(rows []streamRow, claimed []bool, err error) error {
	for i, sr := range rows {
		if !claimed[i] {
			continue
		}
		if _, derr := w.conn.exec(w.conn.unclaimStream, sr.id); derr != nil {
			return errAbort{err}
		}
	}
	return err
}

// plan decides an append to the stream with row sr without writing: it returns the row to
// write the events after, or the result of the earlier append they repeat (FateRepeated), or
// why they cannot be appended.
func (w *writeTx) plan(name string, sr streamRow, expected eventstore.ExpectedRevision, events []eventstore.EventData) (streamRow, eventstore.AppendResult, error) {
	if !expected.Matches(sr.live(), sr.revision) {
		wrong := &eventstore.WrongExpectedRevisionError{Stream: name, Expected: expected, Actual: sr.actual()}
		// A repeat of an exact append finds its events right after the revision it expected.
		from, exact := expected.Revision()
		from++
		if expected.IsNoStream() {
			from, exact = sr.firstRevision, true
		}
		if !exact || !sr.live() || from > sr.revision {
			return streamRow{}, eventstore.AppendResult{}, wrong
		}
		res, repeat, err := w.repeated(sr.id, from, events)
		if err != nil || repeat {
			return sr, res, err
		}
		return streamRow{}, eventstore.AppendResult{}, wrong
	}
	if expected.IsAny() || expected.IsStreamExists() {
		// Without an exact revision, a repeat is found by its first event id.
		rows, err := w.conn.findEvent.query(events[0].ID[:])
		if err != nil {
			return streamRow{}, eventstore.AppendResult{}, err
		}
		if len(rows) == 1 {
			if streamID, from := asInt(rows[0][0]), uint64(asInt(rows[0][1])); streamID == sr.id {
				res, repeat, err := w.repeated(sr.id, from, events)
				if err != nil || repeat {
					return sr, res, err
				}
			}
			return streamRow{}, eventstore.AppendResult{}, fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, events[0].ID)
		}
	}
	return sr, eventstore.AppendResult{}, nil
}

// repeated reports whether the stream holds exactly events, in order, from revision from, and
// if so the result of the append that wrote them.
func (w *writeTx) repeated(streamID int64, from uint64, events []eventstore.EventData) (eventstore.AppendResult, bool, error) {
	rows, err := w.conn.eventsFrom.query(streamID, from, len(events))
	if err != nil || len(rows) != len(events) {
		return eventstore.AppendResult{}, false, err
	}
	for i, row := range rows {
		if !bytes.Equal(asBytes(row[0]), events[i].ID[:]) {
			return eventstore.AppendResult{}, false, nil
		}
	}
	last := rows[len(rows)-1]
	return eventstore.AppendResult{Revision: uint64(asInt(last[1])), Position: position(uint64(asInt(last[2]))), Fate: eventstore.FateRepeated}, true, nil
}

// write appends a's events after the stream's last revision, creating or reviving its row; a
// row that claim inserted (claimed) is the stream's, with its revision that of the last event.
func (w *writeTx) write(a eventstore.StreamAppend, sr streamRow, claimed bool) (eventstore.AppendResult, error) {
	name, events := a.Stream, a.Events
	first := uint64(0)
	if sr.id != 0 && !claimed {
		first = sr.revision + 1
	}
	last := first + uint64(len(events)) - 1
	if !claimed {
		var err error
		if sr, err = w.writeRow(a, sr, first, last); err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
	}
	w.setStream(name, sr)
	var res eventstore.AppendResult
	for i := range events {
		e := &events[i] // not a copy, which e.ID[:] would move to the heap
		var metadata []byte
		if len(e.Metadata) > 0 {
			metadata = e.Metadata
		}
		r, err := w.conn.exec(w.conn.insertEvent, e.ID[:], sr.id, first+uint64(i), e.Type, e.Data, metadata, w.now)
		if err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return eventstore.AppendResult{}, errAbort{fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, e.ID)}
		}
		pos, err := r.LastInsertId()
		if err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		res = eventstore.AppendResult{Revision: first + uint64(i), Position: position(uint64(pos)), Fate: eventstore.FateWritten}
		w.keep(e, name, res)
	}
	return res, nil
}

// writeRow writes the row of a's stream, whose events take revisions first to last: a new
// row, a deleted stream's revived, or a live stream's expiry moved to the new last event's. A
// live stream without a maximum age keeps its row as it is.
func (w *writeTx) writeRow(a eventstore.StreamAppend, sr streamRow, first, last uint64) (streamRow, error) {
	maxAge := cmp.Or(int64(a.MaxAge), sr.maxAge)
	expiresAt := expiry(w.now, maxAge)
	switch {
	case sr.id == 0:
		res, err := w.conn.exec(w.conn.insertStream, a.Stream, last, nullable(maxAge), nullable(expiresAt))
		if err != nil {
			return sr, err
		}
		if sr.id, err = res.LastInsertId(); err != nil {
			return sr, err
		}
	case sr.deleted:
		if _, err := w.conn.exec(w.conn.updateStream, first, last, nullable(maxAge), nullable(expiresAt), sr.id); err != nil {
			return sr, err
		}
		sr.firstRevision, sr.deleted = first, false
	case maxAge > 0:
		if _, err := w.conn.exec(w.conn.setExpiry, maxAge, expiresAt, sr.id); err != nil {
			return sr, err
		}
	}
	sr.revision, sr.maxAge, sr.expiresAt = last, maxAge, expiresAt
	return sr, nil
}

func (w *writeTx) delete(name string, expected eventstore.ExpectedRevision) error {
	sr, err := w.stream(name)
	if err != nil {
		return err
	}
	if !expected.Matches(sr.live(), sr.revision) {
		return &eventstore.WrongExpectedRevisionError{Stream: name, Expected: expected, Actual: sr.actual()}
	}
	if !sr.live() {
		return nil // Any or NoStream on a missing stream: nothing to do
	}
	if _, err := w.remove(name, sr, w.now); err != nil {
		return err
	}
	return w.forgetDeleted()
}

// remove deletes the events of the live stream name and makes its row a deleted one, deleted
// at (Unix nanoseconds): kept, with its last revision and maximum age, for Config.KeepDeleted.
func (w *writeTx) remove(name string, sr streamRow, at int64) (streamRow, error) {
	if _, err := w.conn.exec(w.conn.deleteEvents, sr.id); err != nil {
		return streamRow{}, errAbort{err}
	}
	if _, err := w.conn.exec(w.conn.deleteStream, sr.revision, at, sr.id); err != nil {
		return streamRow{}, errAbort{err}
	}
	sr.deleted, sr.expiresAt = true, 0
	w.setStream(name, sr)
	w.drop(name, math.MaxUint64)
	return sr, nil
}

// expire forgets an expired stream: it is removed as a delete at the time it expired would
// remove it. It reads as not found and takes appends as a deleted stream either way, so the
// writer does it once it meets such a stream, and forgetExpired for the streams it does not
// meet. A stream appended to meanwhile goes on from its last revision, with its maximum age;
// after Config.KeepDeleted its name is forgotten.
func (w *writeTx) expire(name string, sr streamRow) (streamRow, error) {
	return w.remove(name, sr, sr.expiresAt)
}

// expiredChunk is how many expired streams forgetExpired forgets at a time, for each request
// of the transaction, and forgetDeleted's rows with them.
const expiredChunk = 64

// forgetExpired forgets up to expiredChunk expired streams for each of the transaction's n
// requests, the longest expired first, and with each expiredChunk of them up to 64 rows of
// streams deleted before Config.KeepDeleted, as a delete does: expired streams leave nothing
// behind for good though no request meets them. It reports whether it left expired streams.
func (w *writeTx) forgetExpired(n int) (more bool, err error) {
	for range n {
		rows, err := w.conn.expired.query(w.now)
		if err != nil {
			return false, err
		}
		for _, row := range rows {
			if _, err := w.stream(asString(row[0])); err != nil {
				return false, err
			}
		}
		if len(rows) > 0 {
			if err := w.forgetDeleted(); err != nil {
				return false, err
			}
		}
		if len(rows) < expiredChunk {
			return false, nil
		}
	}
	return true, nil
}

// forgetDeleted removes the rows of a few streams deleted before w.forgetBefore: their names
// are then unknown, and a stream appended under one starts at revision 0. Each delete forgets
// up to 64, so the rows of deleted streams stay about as many as the deletes of KeepDeleted.
func (w *writeTx) forgetDeleted() error {
	rows, err := w.conn.forgetStreams.query(w.forgetBefore)
	if err != nil {
		return errAbort{err}
	}
	for _, row := range rows {
		w.setStream(asString(row[0]), streamRow{})
	}
	return nil
}

// truncate removes the events of stream name before revision before.
func (w *writeTx) truncate(name string, before uint64) error {
	sr, err := w.stream(name)
	switch {
	case err != nil:
		return err
	case !sr.live():
		return fmt.Errorf("%w: %s", eventstore.ErrStreamNotFound, name)
	case before > sr.revision:
		return fmt.Errorf("%w: truncate %s before %d, past its last revision %d", eventstore.ErrInvalidArgument, name, before, sr.revision)
	}
	if _, err := w.conn.exec(w.conn.deleteEventsBefore, sr.id, int64(before)); err != nil {
		return errAbort{err}
	}
	w.drop(name, before)
	return nil
}

// drop notes that the events of stream name before revision before are gone: those this
// transaction wrote, and those the tail holds once it commits.
func (w *writeTx) drop(name string, before uint64) {
	w.written = slices.DeleteFunc(w.written, func(e eventstore.RecordedEvent) bool { return e.Stream == name && e.Revision < before })
	if w.gone == nil {
		w.gone = map[string]uint64{}
	}
	w.gone[name] = max(w.gone[name], before)
}

// keep notes an event written, for the tail, with its bytes copied into w.bytes: the appender
// may reuse its own once Append returns. (An array per event cost an allocation per event
// kept.)
func (w *writeTx) keep(e *eventstore.EventData, stream string, at eventstore.AppendResult) {
	data, metadata := w.copied(e.Data), w.copied(e.Metadata)
	if len(metadata) == 0 {
		metadata = nil
	}
	w.written = append(w.written, eventstore.RecordedEvent{
		ID: e.ID, Stream: stream, Revision: at.Revision, Position: at.Position,
		Type: e.Type, Data: data, Metadata: metadata, Recorded: time.Unix(0, w.now).UTC(),
	})
}

// copied returns a copy of b in w.bytes, or in an array of its own if it has no room left
// (eventBytes counts every event the transaction may write).
func (w *writeTx) copied(b []byte) []byte {
	if len(b) > cap(w.bytes)-len(w.bytes) {
		return slices.Clone(b)
	}
	start := len(w.bytes)
	w.bytes = append(w.bytes, b...)
	return w.bytes[start:len(w.bytes):len(w.bytes)]
}
