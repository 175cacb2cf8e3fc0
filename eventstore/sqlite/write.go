package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/acme/orders/eventstore/internal/writeq"

	"github.com/acme/orders/eventstore"
)

// request is a write waiting for the writer.
type request = writeq.Request

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := s.awaitRival(ctx, stream, expected, events[0].ID); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	r := &request{Ctx: ctx, Appends: []eventstore.StreamAppend{{Stream: stream, Expected: expected, Events: events}}}
	if err := s.submit(r); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s@%v: %w", stream, expected, err)
	}
	return r.Results[0], nil
}

// MultiStreamAppend implements eventstore.MultiStreamAppender: the appends are made in one
// transaction, after every expected revision is checked.
func (s *Store) MultiStreamAppend(ctx context.Context, appends ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	if err := eventstore.ValidateMultiStreamAppend(appends); err != nil {
		return nil, err
	}
	r := &request{Ctx: ctx, Appends: appends}
	if err := s.submit(r); err != nil {
		return nil, fmt.Errorf("append to %d streams (%s@%v first): %w", len(appends), appends[0].Stream, appends[0].Expected, err)
	}
	return r.Results, nil
}

// DeleteStream implements eventstore.Store. The events are removed from the file; the stream
// keeps a row for Config.KeepDeleted so that its revisions continue if it is recreated meanwhile.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	if err := s.submit(&request{Ctx: ctx, Stream: stream, Expected: expected}); err != nil {
		return fmt.Errorf("delete %s@%v: %w", stream, expected, err)
	}
	return nil
}

// Truncate implements eventstore.Store: the events before revision before are removed from
// the file.
func (s *Store) Truncate(ctx context.Context, stream string, before uint64) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	if err := s.submit(&request{Ctx: ctx, Stream: stream, Truncate: true, Before: before}); err != nil {
		return fmt.Errorf("truncate %s before %d: %w", stream, before, err)
	}
	return nil
}

// submit hands r to the writer and waits for its outcome. If ctx ends after the writer took r,
// r may still be committed.
func (s *Store) submit(r *request) error {
	if err := s.usable(r.Ctx); err != nil {
		return err
	}
	return writeq.Submit(r, s.requests, s.closing)
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
			r.Answer()
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
	if len(r.Appends) == 0 {
		add(r.Stream)
	}
	for _, a := range r.Appends {
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

// expiryLook is how often, at most, the writer looks for expired streams that no request met,
// to forget them (see writeTx.forgetExpired), unless its last look left some.
const expiryLook = time.Second

// commit writes batch in one transaction and sets each request's result or error. It returns
// the position of the last event written, or 0.
func (s *Store) commit(conn *writeConn, batch []*request) uint64 {
	pending := make([]*request, 0, len(batch))
	for _, r := range batch {
		if err := r.Ctx.Err(); err != nil {
			r.Err = err // the caller gave up before anything was written
			r.Answer()
			continue
		}
		pending = append(pending, r)
	}
	look := s.moreExpired || time.Since(s.looked) >= expiryLook
	for len(pending) > 0 {
		aborted, head, err := s.tryCommit(conn, pending, look)
		if _, forget := err.(errForget); forget {
			// Forgetting can wait for the next look; the requests cannot.
			s.looked, look = time.Now(), false
			continue
		}
		if err != nil {
			err = fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
			// Nothing was written: a refusal that waited for the commit named a revision
			// that is gone with it.
			for _, r := range pending {
				if !r.Answered() {
					r.Err = err
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

// errForget is a failure to forget expired streams, which rolled the transaction back.
type errForget struct{ err error }

func (e errForget) Error() string { return "forget expired streams: " + e.err.Error() }

// tryCommit runs pending in one transaction, after forgetting expired streams if look is set.
// If one request aborts, it rolls back and returns that request's index (its error set);
// otherwise it commits and returns -1 and the position of the last event written (0 if none).
func (s *Store) tryCommit(conn *writeConn, pending []*request, look bool) (aborted int, head uint64, err error) {
	tx, err := conn.begin()
	if err != nil {
		return -1, 0, fmt.Errorf("begin: %w", err)
	}
	if len(s.streams) > maxCachedStreams {
		clear(s.streams)
	}
	clear(s.undo)
	now := time.Now().UnixNano()
	w := writeTx{tx: tx, conn: conn, now: now, forgetBefore: now - int64(cmp.Or(s.cfg.KeepDeleted, DefaultKeepDeleted)), streams: s.streams, undo: s.undo,
		written: s.kept[:0], bytes: make([]byte, 0, eventBytes(pending))}
	more := s.moreExpired
	if look {
		if more, err = w.forgetExpired(len(pending)); err != nil {
			w.rollback()
			return -1, 0, errForget{err}
		}
	}
	if aborted, head = w.apply(pending); aborted >= 0 {
		return aborted, 0, nil
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
	if len(w.written) > 0 || len(w.gone) > 0 {
		s.wrote.Store(true)
	}
	if look {
		s.looked, s.moreExpired = time.Unix(0, now), more
	}
	s.tail.add(w.written, w.gone)
	clear(w.written) // the tail copied the events: let their bytes go with the tail's
	s.kept = w.written
	s.land(f, true)
	return -1, head, nil
}

// apply runs each request of pending in the transaction and sets its outcome. If one aborts, it
// rolls back and returns that request's index (its error set); otherwise -1 and the position
// of the last event written (0 if none).
func (w *writeTx) apply(pending []*request) (aborted int, head uint64) {
	for i, r := range pending {
		switch {
		case r.Truncate:
			r.Err = w.truncate(r.Stream, r.Before)
		case r.Appends == nil:
			r.Err = w.delete(r.Stream, r.Expected)
		default:
			r.Results, r.Err = w.appendAll(r.Appends)
		}
		var abort errAbort
		if errors.As(r.Err, &abort) {
			w.rollback()
			r.Err = storageError(abort.err)
			return i, 0
		}
		r.Err = storageError(r.Err)
		if r.Err == nil {
			for _, res := range r.Results {
				if res.Fate == eventstore.FateWritten { // a repeat's position is an old one
					head = max(head, res.Position.Commit)
				}
			}
		}
	}
	return -1, head
}

// eventBytes is the size of the data and metadata of the events that pending append.
func eventBytes(pending []*request) int {
	n := 0
	for _, r := range pending {
		for _, a := range r.Appends {
			for _, e := range a.Events {
				n += len(e.Data) + len(e.Metadata)
			}
		}
	}
	return n
}

// storageError marks err as ErrUnavailable unless it is one of the contract's own errors.
func storageError(err error) error {
	if err == nil {
		return nil // every request of a batch that commits: nothing to look at
	}
	for _, own := range contractErrors {
		if errors.Is(err, own) {
			return err
		}
	}
	return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
}

// contractErrors are the errors of the store contract that a request's own arguments or the
// streams' state cause, which a retry alone does not mend.
var contractErrors = []error{eventstore.ErrWrongExpectedRevision, eventstore.ErrDuplicateEventID, eventstore.ErrInvalidArgument, eventstore.ErrStreamNotFound}

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
