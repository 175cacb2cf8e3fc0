package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// request is one append or delete waiting for the writer.
type request struct {
	ctx      context.Context
	stream   string
	expected eventstore.ExpectedRevision
	events   []eventstore.EventData // nil for a delete

	result eventstore.AppendResult
	err    error
	done   chan struct{}
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	r := &request{ctx: ctx, stream: stream, expected: expected, events: events}
	if err := s.submit(r); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	return r.result, nil
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

// writer is the only goroutine that writes. It takes every request waiting at the time,
// commits them in one transaction (one fsync), and answers each.
func (s *Store) writer() {
	defer close(s.written)
	batch := make([]*request, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.requests:
			batch = append(batch, r)
		case <-s.closing:
			return
		}
	gather:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case r := <-s.requests:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		if head := s.commit(batch); head > 0 {
			s.notify(head)
		}
		for _, r := range batch {
			close(r.done)
		}
		if s.cfg.OnBatch != nil {
			s.cfg.OnBatch(len(batch))
		}
	}
}

// maxCachedStreams bounds the writer's stream cache; past it the cache starts again empty.
const maxCachedStreams = 100_000

// errAbort marks a request whose failure left partial writes in the transaction: the
// transaction is rolled back and retried without it.
type errAbort struct{ err error }

func (e errAbort) Error() string { return e.err.Error() }

// commit writes batch in one transaction and sets each request's result or error. It returns
// the position of the last event written, or 0.
func (s *Store) commit(batch []*request) uint64 {
	pending := make([]*request, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err // the caller gave up before anything was written
			continue
		}
		pending = append(pending, r)
	}
	for len(pending) > 0 {
		aborted, head, err := s.tryCommit(pending)
		if err != nil {
			err = fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
			for _, r := range pending {
				if r.err == nil {
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
func (s *Store) tryCommit(pending []*request) (aborted int, head uint64, err error) {
	tx, err := s.wdb.Begin()
	if err != nil {
		return -1, 0, fmt.Errorf("begin: %w", err)
	}
	if len(s.streams) > maxCachedStreams {
		clear(s.streams)
	}
	w := writeTx{tx: tx, stmt: &s.stmt, now: time.Now().UnixNano(), streams: s.streams, undo: map[string]*streamRow{}}
	for i, r := range pending {
		if r.events == nil {
			r.err = w.delete(r.stream, r.expected)
		} else {
			r.result, r.err = w.append(r.stream, r.expected, r.events)
		}
		var abort errAbort
		if errors.As(r.err, &abort) {
			w.rollback()
			r.err = storageError(abort.err)
			return i, 0, nil
		}
		r.err = storageError(r.err)
		if r.err == nil && r.events != nil {
			head = max(head, r.result.Position.Commit)
		}
	}
	if err := tx.Commit(); err != nil {
		w.rollback()
		return -1, 0, fmt.Errorf("commit: %w", err)
	}
	return -1, head, nil
}

// storageError marks err as ErrUnavailable unless it is one of the contract's own errors.
func storageError(err error) error {
	if err == nil || errors.Is(err, eventstore.ErrWrongExpectedRevision) || errors.Is(err, eventstore.ErrDuplicateEventID) {
		return err
	}
	return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
}

// writeStmts are the writer's prepared statements.
type writeStmts struct {
	stream, insertStream, updateStream, deleteStream *sql.Stmt
	insertEvent, findEvent, eventsFrom, deleteEvents *sql.Stmt
}

func (ws *writeStmts) prepare(db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&ws.stream, `SELECT id, first_revision, last_revision, deleted,
			(SELECT max(revision) FROM events WHERE stream_id = streams.id) FROM streams WHERE name = ?`},
		{&ws.insertStream, `INSERT INTO streams (name, first_revision, last_revision) VALUES (?, 0, ?)`},
		{&ws.updateStream, `UPDATE streams SET first_revision = ?, last_revision = ?, deleted = 0 WHERE id = ?`},
		{&ws.deleteStream, `UPDATE streams SET last_revision = ?, deleted = 1 WHERE id = ?`},
		{&ws.insertEvent, `INSERT INTO events (id, stream_id, revision, type, data, metadata, recorded)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`},
		{&ws.findEvent, `SELECT stream_id, revision FROM events WHERE id = ?`},
		{&ws.eventsFrom, `SELECT id, revision, position FROM events
			WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?`},
		{&ws.deleteEvents, `DELETE FROM events WHERE stream_id = ?`},
	} {
		stmt, err := db.Prepare(p.sql)
		if err != nil {
			ws.close()
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = stmt
	}
	return nil
}

func (ws *writeStmts) close() {
	for _, st := range []*sql.Stmt{ws.stream, ws.insertStream, ws.updateStream, ws.deleteStream,
		ws.insertEvent, ws.findEvent, ws.eventsFrom, ws.deleteEvents} {
		if st != nil {
			st.Close()
		}
	}
}

// writeTx applies requests inside the writer's transaction.
type writeTx struct {
	tx   *sql.Tx
	stmt *writeStmts
	now  int64

	// streams caches stream rows across transactions; only the writer touches it, so it is
	// the truth for every stream it holds. undo keeps the entries this transaction changed,
	// as they were, to restore them if it rolls back.
	streams map[string]streamRow
	undo    map[string]*streamRow
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
	var sr streamRow
	var last sql.NullInt64
	err := w.tx.Stmt(w.stmt.stream).QueryRow(name).Scan(&sr.id, &sr.firstRevision, &sr.revision, &sr.deleted, &last)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return streamRow{}, err
	}
	if last.Valid && !sr.deleted {
		sr.revision = uint64(last.Int64)
	}
	w.streams[name] = sr
	return sr, nil
}

// setStream records the stream's new state, keeping the old one for rollback.
func (w *writeTx) setStream(name string, sr streamRow) {
	if _, ok := w.undo[name]; !ok {
		if old, ok := w.streams[name]; ok {
			w.undo[name] = &old
		} else {
			w.undo[name] = nil
		}
	}
	w.streams[name] = sr
}

// rollback undoes the transaction, in the database and in the stream cache.
func (w *writeTx) rollback() {
	w.tx.Rollback()
	for name, old := range w.undo {
		if old == nil {
			delete(w.streams, name)
		} else {
			w.streams[name] = *old
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

func (w *writeTx) append(name string, expected eventstore.ExpectedRevision, events []eventstore.EventData) (eventstore.AppendResult, error) {
	sr, err := w.stream(name)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if !check(sr, expected) {
		wrong := &eventstore.WrongExpectedRevisionError{Stream: name, Expected: expected, Actual: sr.actual()}
		// A repeat of an exact append finds its events right after the revision it expected.
		from, exact := expected.Revision()
		from++
		if expected.IsNoStream() {
			from, exact = sr.firstRevision, true
		}
		if !exact || !sr.live() || from > sr.revision {
			return eventstore.AppendResult{}, wrong
		}
		res, repeat, err := w.repeated(sr.id, from, events)
		if err != nil || repeat {
			return res, err
		}
		return eventstore.AppendResult{}, wrong
	}
	if expected.IsAny() || expected.IsStreamExists() {
		// Without an exact revision, a repeat is found by its first event id.
		var streamID int64
		var from uint64
		err := w.tx.Stmt(w.stmt.findEvent).QueryRow(events[0].ID[:]).Scan(&streamID, &from)
		switch {
		case err == nil && streamID == sr.id:
			res, repeat, err := w.repeated(sr.id, from, events)
			if err != nil || repeat {
				return res, err
			}
			return eventstore.AppendResult{}, fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, events[0].ID)
		case err == nil:
			return eventstore.AppendResult{}, fmt.Errorf("%w: %s", eventstore.ErrDuplicateEventID, events[0].ID)
		case !errors.Is(err, sql.ErrNoRows):
			return eventstore.AppendResult{}, err
		}
	}
	return w.write(name, sr, events)
}

// repeated reports whether the stream holds exactly events, in order, from revision from, and
// if so the result of the append that wrote them.
func (w *writeTx) repeated(streamID int64, from uint64, events []eventstore.EventData) (eventstore.AppendResult, bool, error) {
	rows, err := w.tx.Stmt(w.stmt.eventsFrom).Query(streamID, from, len(events))
	if err != nil {
		return eventstore.AppendResult{}, false, err
	}
	defer rows.Close()
	var res eventstore.AppendResult
	n := 0
	for rows.Next() {
		var id []byte
		var pos uint64
		if err := rows.Scan(&id, &res.Revision, &pos); err != nil {
			return eventstore.AppendResult{}, false, err
		}
		if uuid.UUID(id) != events[n].ID {
			return eventstore.AppendResult{}, false, nil
		}
		res.Position = position(pos)
		n++
	}
	if err := rows.Err(); err != nil {
		return eventstore.AppendResult{}, false, err
	}
	return res, n == len(events), nil
}

// write appends events after the stream's last revision, creating or reviving its row.
func (w *writeTx) write(name string, sr streamRow, events []eventstore.EventData) (eventstore.AppendResult, error) {
	first := uint64(0)
	if sr.id != 0 {
		first = sr.revision + 1
	}
	last := first + uint64(len(events)) - 1
	switch {
	case sr.id == 0:
		res, err := w.tx.Stmt(w.stmt.insertStream).Exec(name, last)
		if err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		if sr.id, err = res.LastInsertId(); err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
	case sr.deleted:
		if _, err := w.tx.Stmt(w.stmt.updateStream).Exec(first, last, sr.id); err != nil {
			return eventstore.AppendResult{}, errAbort{err}
		}
		sr.firstRevision, sr.deleted = first, false
	}
	sr.revision = last
	w.setStream(name, sr)
	insert := w.tx.Stmt(w.stmt.insertEvent)
	var res eventstore.AppendResult
	for i, e := range events {
		var metadata []byte
		if len(e.Metadata) > 0 {
			metadata = e.Metadata
		}
		r, err := insert.Exec(e.ID[:], sr.id, first+uint64(i), e.Type, e.Data, metadata, w.now)
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
		res = eventstore.AppendResult{Revision: first + uint64(i), Position: position(uint64(pos))}
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
	if _, err := w.tx.Stmt(w.stmt.deleteEvents).Exec(sr.id); err != nil {
		return errAbort{err}
	}
	if _, err := w.tx.Stmt(w.stmt.deleteStream).Exec(sr.revision, sr.id); err != nil {
		return errAbort{err}
	}
	sr.deleted = true
	w.setStream(name, sr)
	return nil
}
