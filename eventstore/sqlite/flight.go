package sqlite

import (
	"context"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// flight is what the transaction being committed appends to streams that existed before it,
// for the appends that can only lose to it (see Store.awaitRival).
type flight struct {
	streams   map[string]flightStream
	done      chan struct{} // closed once the commit has ended
	committed bool          // whether it committed; set before done is closed
}

// flightStream is a stream that the transaction appends to: its last revision before, the one
// the transaction leaves, and the id of the first event it appends.
type flightStream struct {
	before, after uint64
	firstID       uuid.UUID
}

// flight returns what the transaction appends to streams that existed before it, or nil.
func (w *writeTx) flight() *flight {
	var f *flight
	for _, e := range w.written {
		old := w.undo[e.Stream]
		if !old.cached || !old.row.live() || old.row.expired(w.now) || e.Revision != old.row.revision+1 {
			continue // a new (or expired) stream, or not the first event the transaction appends
		}
		if f == nil {
			f = &flight{streams: map[string]flightStream{}, done: make(chan struct{})}
		}
		f.streams[e.Stream] = flightStream{before: old.row.revision, after: w.streams[e.Stream].revision, firstID: e.ID}
	}
	return f
}

// fly publishes f, the transaction about to commit, if there is one.
func (s *Store) fly(f *flight) {
	if f != nil {
		s.flight.Store(f)
	}
}

// land tells the appends waiting for f how its commit ended.
func (s *Store) land(f *flight, committed bool) {
	if f == nil {
		return
	}
	s.flight.Store(nil)
	f.committed = committed
	close(f.done)
}

// awaitRival returns the refusal of an append at an exact revision of a stream that the
// transaction being committed appends to from that same revision, once that transaction has
// committed: the stream is then past the revision, and the append would only lose, one
// transaction later. So a racer that arrives during its winner's sync hears so when the sync
// ends, as a loser in the winner's own batch does. It returns nil, for the writer to decide, if
// the transaction did not commit, if the append's first event is the transaction's (it may be a
// repeat), and for every other append.
func (s *Store) awaitRival(ctx context.Context, stream string, expected eventstore.ExpectedRevision, first uuid.UUID) error {
	f := s.flight.Load()
	if f == nil {
		return nil
	}
	fs, ok := f.streams[stream]
	rev, exact := expected.Revision()
	if !ok || !exact || rev != fs.before || first == fs.firstID {
		return nil
	}
	s.cfg.hooks.waiting()
	select {
	case <-f.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !f.committed {
		return nil
	}
	return &eventstore.WrongExpectedRevisionError{Stream: stream, Expected: expected, Actual: eventstore.Exact(fs.after)}
}
