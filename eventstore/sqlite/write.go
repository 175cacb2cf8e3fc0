package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/acme/orders/eventstore"
)

// request is one append, multi-stream append or delete waiting for the writer.
type request struct {
	ctx context.Context
	// appends are made all or nothing. A delete has none: it deletes stream at expected.
	appends  []eventstore.StreamAppend
	stream   string
	expected eventstore.ExpectedRevision

	results []eventstore.AppendResult // one per append
	err     error
	done    chan struct{}
	// answered says that done is closed: results and err no longer change. Only the writer
	// reads or sets it.
	answered bool
}

// answer hands r's outcome to its caller, once.
func (r *request) answer() {
	if !r.answered {
		r.answered = true
		close(r.done)
	}
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := s.awaitRival(ctx, stream, expected, events[0].ID); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	r := &request{ctx: ctx, appends: []eventstore.StreamAppend{{Stream: stream, Expected: expected, Events: events}}}
	if err := s.submit(r); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	return r.results[0], nil
}

// MultiStreamAppend implements eventstore.MultiStreamAppender: the appends are made in one
// transaction, after every expected revision is checked.
func (s *Store) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	if err := eventstore.ValidateMultiStreamAppend(appends); err != nil {
		return nil, err
	}
	r := &request{ctx: ctx, appends: appends}
	if err := s.submit(r); err != nil {
		return nil, fmt.Errorf("append to %d streams (%s@%v first): %w", len(appends), appends[0].Stream, appends[0].Expected, err)
	}
	return r.results, nil
}

// DeleteStream implements eventstore.Store. The events are removed from the file; the stream
// keeps a row so that its revisions continue if it is recreated.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	if err := s.submit(&request{ctx: ctx, stream: stream, expected: expected}); err != nil {
		return fmt.Errorf("delete %s@%v: %w", stream, expected, err)
	}
	return nil
}

// submit hands r to the writer and waits for its outcome. If ctx ends after the writer took r,
// r may still be committed.
func (s *Store) submit(r *request) error {
	if err := s.usable(r.ctx); err != nil {
		return err
	}
	r.done = make(chan struct{})
	select {
	case s.requests <- r:
	case <-s.closing:
		return eventstore.ErrClosed
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// writer is the only goroutine that writes. It holds the write connection for the store's
// life and talks to the driver directly: database/sql's per-statement wrapping cost more than
// the statements. ready receives nil once its statements are prepared, or why they are not.
func (s *Store) writer(conn *sql.Conn, ready chan<- error) {
	defer close(s.written)
	err := conn.Raw(func(dc any) error {
		w, err := newWriteConn(dc, walSizeLimit(s.cfg.CheckpointFrames))
		if err != nil {
			return err
		}
		defer w.close()
		ready <- nil
		s.serve(w)
		return nil
	})
	conn.Close()
	if err != nil {
		ready <- err
	}
}

// serve takes every request waiting at the time, commits them in one transaction (one
// fsync), and answers each, until the store closes: the appenders that arrive while a batch
// syncs make the next batch (see gather).
func (s *Store) serve(conn *writeConn) {
	batch := make([]*request, 0, s.cfg.MaxBatch)
	var restart walRestart
	for {
		batch = batch[:0]
		select {
		case r := <-s.requests:
			batch = append(batch, r)
		case done := <-s.finish:
			select {
			case <-s.closing: // both were ready: closing comes first
			default:
				restart.copied(conn)
			}
			close(done)
			continue
		case <-s.closing:
			return
		}
		batch = s.gather(batch)
		if head := s.commit(conn, batch); head > 0 {
			s.notify(head)
		}
		for _, r := range batch {
			r.answer()
		}
		if s.cfg.OnBatch != nil {
			s.cfg.OnBatch(len(batch))
		}
		restart.committed(conn)
	}
}

// gatherYields is how many times the writer yields the processor for more requests before it
// commits what it has.
const gatherYields = 8

// calmBatches is how many batches after one that appended twice to one stream the writer
// commits without yielding for more requests.
const calmBatches = 64

// gather adds to batch the requests waiting now, up to Config.MaxBatch. It also yields the
// processor a few times for more: on a small machine the appenders just answered need it to
// send their next append, and a larger batch makes each append's share of the fsync smaller.
// But not while appenders race on one stream (a recent batch appended twice to one): at most
// one of them can win a batch, so the wait only delays the commit that answers them all.
func (s *Store) gather(batch []*request) []*request {
	if s.gathered == nil {
		s.gathered = make(map[string]struct{})
	}
	clear(s.gathered)
	contended := false
	defer func() {
		if contended {
			s.calm = calmBatches
		} else if s.calm > 0 {
			s.calm--
		}
	}()
	for _, r := range batch {
		contended = s.gatherStreams(r) || contended
	}
	for idle := 0; len(batch) < s.cfg.MaxBatch; {
		select {
		case r := <-s.requests:
			batch = append(batch, r)
			contended = s.gatherStreams(r) || contended
			continue
		default:
		}
		if s.cfg.hooks.gatherMore(len(batch)) {
			select {
			case r := <-s.requests:
				batch = append(batch, r)
			case <-s.closing:
				return batch
			}
			continue
		}
		if idle++; contended || s.calm > 0 || idle > gatherYields {
			return batch
		}
		runtime.Gosched()
	}
	return batch
}

// gatherStreams adds r's streams (a delete's, or its appends') to the batch's, and reports
// whether one was there already.
func (s *Store) gatherStreams(r *request) (repeated bool) {
	add := func(stream string) {
		if _, ok := s.gathered[stream]; ok {
			repeated = true
		}
		s.gathered[stream] = struct{}{}
	}
	if len(r.appends) == 0 {
		add(r.stream)
	}
	for _, a := range r.appends {
		add(a.Stream)
	}
	return repeated
}

// restartTries bounds how many commits in a row the writer copies the WAL again after it
// failed to start over; the checkpointer's next round tries again.
const restartTries = 8

// writerCopyMax is the most frames the writer copies itself: more is the checkpointer's work,
// beside the writer, in its next round. Past a reader that held the copies back, what waits to
// be copied can be a whole round's frames, which would hold the commits behind it.
const writerCopyMax = 2_000

// walRestart follows the WAL after the writer's part of a copy (see Store.checkpointer). The
// WAL starts over in the next write transaction only if every frame was copied and no reader
// still reads from it; a reader that began before the copy keeps the frames after its state
// from being copied, or holds the WAL. Then the writer copies again after each commit, until
// the WAL has started over, which it tells by fewer frames, or fewer copied, than before.
// SQLite's own checkpoints would retry at every commit the same way.
type walRestart struct {
	waiting bool
	last    walState // after the last copy
	tries   int
}

// copied copies the rest of the WAL, and waits for it to start over.
func (r *walRestart) copied(conn *writeConn) {
	*r = walRestart{}
	if wal, ok := conn.lookAtWAL(); ok {
		r.copy(conn, wal)
	}
}

// committed checks, after a commit, whether the WAL started over, and copies it again if not.
func (r *walRestart) committed(conn *writeConn) {
	if !r.waiting {
		return
	}
	if r.tries++; r.tries > restartTries {
		*r = walRestart{} // readers held it too long: the checkpointer's next round tries again
		return
	}
	wal, ok := conn.lookAtWAL()
	switch {
	case !ok:
		return // a copy under way on the checkpointer's connection: look after the next commit
	case wal.frames < r.last.frames || wal.copied < r.last.copied:
		*r = walRestart{} // started over
		return
	}
	r.copy(conn, wal)
}

// copy copies what the WAL, in state wal, holds beyond what was copied, unless that is more
// than writerCopyMax frames, and then waits for the WAL to start over.
func (r *walRestart) copy(conn *writeConn, wal walState) {
	if wal.frames == 0 || wal.frames-wal.copied > writerCopyMax {
		r.waiting = false
		return
	}
	if wal.frames > wal.copied {
		var ok bool
		if wal, ok = conn.copyWAL(); !ok {
			r.waiting = false
			return
		}
	}
	r.waiting, r.last = true, wal
}

// maxCachedStreams bounds the writer's stream cache; past it the cache starts again empty.
const maxCachedStreams = 100_000

// errAbort marks a request whose failure left partial writes in the transaction: the
// transaction is rolled back and retried without it.
type errAbort struct{ err error }

func (e errAbort) Error() string { return e.err.Error() }

// commit writes batch in one transaction and sets each request's result or error. It returns
// the position of the last event written, or 0.
func (s *Store) commit(conn *writeConn, batch []*request) uint64 {
	pending := make([]*request, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err // the caller gave up before anything was written
			r.answer()
			continue
		}
		pending = append(pending, r)
	}
	for len(pending) > 0 {
		aborted, head, err := s.tryCommit(conn, pending)
		if err != nil {
			err = fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
			// Nothing was written: a refusal that waited for the commit named a revision
			// that is gone with it.
			for _, r := range pending {
				if !r.answered {
					r.err = err
				}
			}
			return 0
		}
		if aborted < 0 {
			return head
		}
		pending = append(pending[:aborted], pending[aborted+1:]...)
	}
	return 0
}

// tryCommit runs pending in one transaction. If one request aborts, it rolls back and returns
// that request's index (its error set); otherwise it commits and returns -1 and the position of
// the last event written (0 if none).
func (s *Store) tryCommit(conn *writeConn, pending []*request) (aborted int, head uint64, err error) {
	tx, err := conn.begin()
	if err != nil {
		return -1, 0, fmt.Errorf("begin: %w", err)
	}
	if len(s.streams) > maxCachedStreams {
		clear(s.streams)
	}
	clear(s.undo)
	w := writeTx{tx: tx, conn: conn, now: time.Now().UnixNano(), streams: s.streams, undo: s.undo,
		written: s.kept[:0], bytes: make([]byte, 0, eventBytes(pending))}
	for i, r := range pending {
		if r.appends == nil {
			r.err = w.delete(r.stream, r.expected)
		} else {
			r.results, r.err = w.appendAll(r.appends)
		}
		var abort errAbort
		if errors.As(r.err, &abort) {
			w.rollback()
			r.err = storageError(abort.err)
			return i, 0, nil
		}
		r.err = storageError(r.err)
		if r.err == nil {
			for _, res := range r.results {
				if res.Fate == eventstore.FateWritten { // a repeat's position is an old one
					head = max(head, res.Position.Commit)
				}
			}
		}
	}
	w.answerRefusals(pending)
	f := w.flight()
	s.fly(f)
	err = s.cfg.hooks.commit(pending)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		w.rollback()
		s.land(f, false)
		return -1, 0, fmt.Errorf("commit: %w", err)
	}
	if len(w.written) > 0 || len(w.deleted) > 0 {
		s.wrote.Store(true)
	}
	s.tail.add(w.written, w.deleted)
	clear(w.written) // the tail copied the events: let their bytes go with the tail's
	s.kept = w.written
	s.land(f, true)
	return -1, head, nil
}

// eventBytes is the size of the data and metadata of the events that pending append.
func eventBytes(pending []*request) int {
	n := 0
	for _, r := range pending {
		for _, a := range r.appends {
			for _, e := range a.Events {
				n += len(e.Data) + len(e.Metadata)
			}
		}
	}
	return n
}

// answerRefusals answers, before the commit, each refusal of a stream that the transaction
// leaves as it was: the refusal rests on committed events alone, and holds whatever becomes
// of the transaction. A refusal of a stream the transaction wrote waits for the commit: its
// Actual names a revision that is durable only then, and a read before then still finds the
// revision the loser expected, with which it would only lose again.
func (w *writeTx) answerRefusals(pending []*request) {
	for _, r := range pending {
		if wrong, ok := r.err.(*eventstore.WrongExpectedRevisionError); ok {
			if _, changed := w.undo[wrong.Stream]; !changed {
				r.answer()
			}
		}
	}
}

// storageError marks err as ErrUnavailable unless it is one of the contract's own errors.
func storageError(err error) error {
	if err == nil || errors.Is(err, eventstore.ErrWrongExpectedRevision) || errors.Is(err, eventstore.ErrDuplicateEventID) {
		return err
	}
	return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
}

// writeTx applies requests inside the writer's transaction.
type writeTx struct {
	tx   driver.Tx
	conn *writeConn
	now  int64

	// streams caches stream rows across transactions; only the writer touches it, so it is
	// the truth for every stream it holds. undo keeps the entries this transaction changed,
	// as they were, to restore them if it rolls back.
	streams map[string]streamRow
	undo    map[string]cachedRow

	// written and deleted are what the transaction did, for the tail once it commits. bytes
	// holds the written events' data and metadata: one array for the transaction, which only
	// grows within its capacity, so that what the tail hands out is never written over.
	written []eventstore.RecordedEvent
	deleted map[string]bool
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
}

func (sr streamRow) live() bool { return sr.id != 0 && !sr.deleted }

// actual is the stream's state as a wrong-expected-revision error reports it.
func (sr streamRow) actual() eventstore.ExpectedRevision {
	if !sr.live() {
		return eventstore.NoStream
	}
	return eventstore.Exact(sr.revision)
}

func (w *writeTx) stream(name string) (streamRow, error) {
	if sr, ok := w.streams[name]; ok {
		return sr, nil
	}
	rows, err := w.conn.stream.query(name)
	if err != nil {
		return streamRow{}, err
	}
	var sr streamRow
	if len(rows) == 1 {
		row := rows[0]
		sr = streamRow{id: asInt(row[0]), firstRevision: uint64(asInt(row[1])), revision: uint64(asInt(row[2])), deleted: asInt(row[3]) != 0}
		if last, ok := row[4].(int64); ok && !sr.deleted {
			sr.revision = uint64(last)
		}
	}
	w.streams[name] = sr
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

// check reports whether expected matches the stream.
func check(sr streamRow, expected eventstore.ExpectedRevision) bool {
	switch {
	case expected.IsAny():
		return true
	case expected.IsNoStream():
		return !sr.live()
	case expected.IsStreamExists():
		return sr.live()
	}
	rev, _ := expected.Revision()
	return sr.live() && sr.revision == rev
}

// appendAll makes appends all or nothing. Every one is checked before any event is written, so
// that a refusal leaves the transaction as it was; a failed write aborts it. A stream created
// with NoStream that the writer has not cached is claimed by its row's INSERT in the check
// itself (see claim): a refusal of a later append deletes the rows claimed before it.
func (w *writeTx) appendAll(appends []eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	results := make([]eventstore.AppendResult, len(appends))
	rows := make([]streamRow, len(appends))
	claimed := make([]bool, len(appends))
	for i, a := range appends {
		var err error
		if rows[i], claimed[i], err = w.claim(a.Stream, a.Expected, len(a.Events)); err == nil && !claimed[i] {
			rows[i], results[i], err = w.plan(a.Stream, rows[i], a.Expected, a.Events)
		}
		if err != nil {
			return nil, w.unclaim(rows[:i], claimed[:i], err)
		}
	}
	for i, a := range appends {
		if results[i].Fate == eventstore.FateRepeated {
			continue
		}
		var err error
		if results[i], err = w.write(a.Stream, rows[i], claimed[i], a.Events); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// claim returns the stream's row: the cached one, or for an append with expected NoStream to a
// stream the writer has not cached, one it inserts for the n events to come, unless the name
// has a row already (then it reads that row, as for any other append). A new stream so costs
// one statement instead of a SELECT that finds nothing and the INSERT. claimed says that the
// row is the inserted one, for n events from revision 0.
func (w *writeTx) claim(name string, expected eventstore.ExpectedRevision, n int) (sr streamRow, claimed bool, err error) {
	if sr, cached := w.streams[name]; cached || !expected.IsNoStream() {
		if !cached {
			sr, err = w.stream(name)
		}
		return sr, false, err
	}
	res, err := w.conn.exec(w.conn.claimStream, name, n-1)
	if err != nil {
		return streamRow{}, false, err
	}
	if inserted, err := res.RowsAffected(); err != nil || inserted == 0 {
		if err == nil {
			sr, err = w.stream(name) // the name has a row: a live stream, or a deleted one
		}
		return sr, false, err
	}
	if sr.id, err = res.LastInsertId(); err != nil {
		return streamRow{}, false, errAbort{err}
	}
	sr.revision = uint64(n - 1)
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
	if !check(sr, expected) {
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

// write appends events after the stream's last revision, creating or reviving its row; a row
// that claim inserted (claimed) is the stream's, with its revision that of the last event.
func (w *writeTx) write(name string, sr streamRow, claimed bool, events []eventstore.EventData) (eventstore.AppendResult, error) {
	first := uint64(0)
	if sr.id != 0 && !claimed {
		first = sr.revision + 1
	}
	last := first + uint64(len(events)) - 1
	switch {
	case claimed:
	case sr.id == 0:
		res, err := w.conn.exec(w.conn.insertStream, name, last)
		if err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		if sr.id, err = res.LastInsertId(); err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
	case sr.deleted:
		if _, err := w.conn.exec(w.conn.updateStream, first, last, sr.id); err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		sr.firstRevision, sr.deleted = first, false
	}
	sr.revision = last
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

func (w *writeTx) delete(name string, expected eventstore.ExpectedRevision) error {
	sr, err := w.stream(name)
	if err != nil {
		return err
	}
	if !check(sr, expected) {
		return &eventstore.WrongExpectedRevisionError{Stream: name, Expected: expected, Actual: sr.actual()}
	}
	if !sr.live() {
		return nil // Any or NoStream on a missing stream: nothing to do
	}
	if _, err := w.conn.exec(w.conn.deleteEvents, sr.id); err != nil {
		return errAbort{err}
	}
	if _, err := w.conn.exec(w.conn.deleteStream, sr.revision, sr.id); err != nil {
		return errAbort{err}
	}
	sr.deleted = true
	w.setStream(name, sr)
	w.written = slices.DeleteFunc(w.written, func(e eventstore.RecordedEvent) bool { return e.Stream == name })
	if w.deleted == nil {
		w.deleted = map[string]bool{}
	}
	w.deleted[name] = true
	return nil
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

// testHooks let this package's tests hold the writer where a test needs it. Config.hooks is
// nil outside them.
type testHooks struct {
	// gather, if set, says whether the writer waits for one more request before it writes a
	// batch of n.
	gather func(n int) bool
	// beforeCommit, if set, runs just before COMMIT with the batch's requests; an error fails
	// the commit as a failed sync would.
	beforeCommit func(pending []*request) error
	// awaiting, if set, runs when an append starts to wait for the commit it would lose to.
	awaiting func()
}

func (h *testHooks) waiting() {
	if h != nil && h.awaiting != nil {
		h.awaiting()
	}
}

func (h *testHooks) gatherMore(n int) bool { return h != nil && h.gather != nil && h.gather(n) }

func (h *testHooks) commit(pending []*request) error {
	if h == nil || h.beforeCommit == nil {
		return nil
	}
	return h.beforeCommit(pending)
}
