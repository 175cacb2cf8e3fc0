package postgres

import (
	"context"
	"fmt"
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
	appends := []eventstore.StreamAppend{{Stream: stream, Expected: expected, Events: events}}
	if err := validAppends(appends); err != nil {
		return eventstore.AppendResult{}, err
	}
	r := &request{Ctx: ctx, Appends: appends}
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
	if err := validAppends(appends); err != nil {
		return nil, err
	}
	r := &request{Ctx: ctx, Appends: appends}
	if err := s.submit(r); err != nil {
		return nil, fmt.Errorf("append to %d streams (%s@%v first): %w", len(appends), appends[0].Stream, appends[0].Expected, err)
	}
	return r.Results, nil
}

// DeleteStream implements eventstore.Store. The events are deleted; the stream keeps its row
// for Config.KeepDeleted so that its revisions continue if it is recreated meanwhile.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	if err := validStream(stream); err != nil {
		return err
	}
	if err := s.submit(&request{Ctx: ctx, Stream: stream, Expected: expected}); err != nil {
		return fmt.Errorf("delete %s@%v: %w", stream, expected, err)
	}
	return nil
}

// Truncate implements eventstore.Store: the events before revision before are deleted, from
// the stream and from the log.
func (s *Store) Truncate(ctx context.Context, stream string, before uint64) error {
	if err := validStream(stream); err != nil {
		return err
	}
	if err := s.submit(&request{Ctx: ctx, Stream: stream, Truncate: true, Before: before}); err != nil {
		return fmt.Errorf("truncate %s before %d: %w", stream, before, err)
	}
	return nil
}

func validStream(stream string) error {
	if err := eventstore.ValidateStream(stream); err != nil {
		return err
	}
	return validText("stream", stream)
}

// submit hands r to the writer and waits for its outcome. If ctx ends after the writer took r,
// r may still be committed.
func (s *Store) submit(r *request) error {
	if err := s.usable(r.Ctx); err != nil {
		return err
	}
	// The writer bounds r's whole wait from now, its turn behind the transaction in progress
	// included (see deadline); the caller's context keeps its own deadline.
	r.Ctx = context.WithValue(r.Ctx, queuedKey{}, time.Now())
	return writeq.Submit(r, s.requests, s.closing)
}

// queuedKey keys, in a request's context, when submit handed it to the writer.
type queuedKey struct{}

// deadline is when r's wait for its outcome ends: Config.StatementTimeout after it was queued.
// Counted from the start of its own transaction instead, a request queued behind a transaction
// that waits out its timeout (a table locked by another session) would wait two.
func (s *Store) deadline(r *request) time.Time {
	queued, ok := r.Ctx.Value(queuedKey{}).(time.Time)
	if !ok {
		queued = time.Now() // handed to the writer by a test, not through submit
	}
	return queued.Add(s.cfg.StatementTimeout)
}

// errWaitedOut fails a request whose deadline passed before a transaction could take it.
var errWaitedOut = fmt.Errorf("%w: the writer had no turn for the write within the statement timeout", eventstore.ErrUnavailable)

// writer is the only goroutine of the store that writes: it takes every request waiting at
// the time, up to Config.MaxBatch, commits them in one transaction and answers each, until
// the store closes. The requests that arrive while it commits make the next batch.
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
		s.commit(batch)
	}
}

// commit writes batch, each request's outcome set, and answers its requests. A request whose
// caller gave up, or whose deadline passed, before the transaction began is left out; the
// transaction ends by the earliest deadline of the others. If the server rejects a value of a
// transaction of several requests, each is tried again alone: the fault is one request's, and
// the others must not fail with it.
func (s *Store) commit(batch []*request) {
	pending, due := s.admit(batch)
	if len(pending) == 0 {
		return
	}
	look := s.look(len(pending))
	wrote, err := s.tryCommit(pending, due, look)
	if err != nil && look > 0 {
		// Forgetting expired streams can wait for the next look; the requests cannot.
		s.looked = time.Now()
		wrote, err = s.tryCommit(pending, due, 0)
	}
	if err != nil && len(pending) > 1 && dataRejected(err) {
		for _, r := range pending {
			w, err := s.tryCommit([]*request{r}, s.deadline(r), 0)
			s.answer([]*request{r}, err)
			wrote = wrote || w
		}
	} else {
		s.answer(pending, err)
		if err == nil && s.cfg.OnBatch != nil {
			s.cfg.OnBatch(len(pending))
		}
	}
	if wrote {
		s.wake()
	}
}

// admit answers the requests of batch whose caller gave up or whose deadline has passed, and
// returns the others, with the earliest of their deadlines.
func (s *Store) admit(batch []*request) (pending []*request, due time.Time) {
	now := time.Now()
	for _, r := range batch {
		d := s.deadline(r)
		switch {
		case r.Ctx.Err() != nil:
			r.Err = r.Ctx.Err()
		case !now.Before(d):
			r.Err = errWaitedOut
		default:
			pending = append(pending, r)
			if due.IsZero() || d.Before(due) {
				due = d
			}
			continue
		}
		r.Answer()
	}
	return pending, due
}

// answer hands each request its outcome; err, if not nil, is the transaction's, and is every
// request's: nothing was written.
func (s *Store) answer(pending []*request, err error) {
	for _, r := range pending {
		if err != nil {
			r.Results, r.Err = nil, s.fault(s.ctx, err)
		}
		r.Answer()
	}
}
