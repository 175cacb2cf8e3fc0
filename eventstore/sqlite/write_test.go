package sqlite

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
)

// pairedStore opens a store whose writer, once armed, waits for two requests before it writes
// a batch and runs beforeCommit on them just before COMMIT.
func pairedStore(t *testing.T, beforeCommit func(pending []*request) error) (s *Store, arm func()) {
	t.Helper()
	var armed atomic.Bool
	hooks := &testHooks{
		gather: func(n int) bool { return armed.Load() && n < 2 },
		beforeCommit: func(pending []*request) error {
			if !armed.Load() {
				return nil
			}
			return beforeCommit(pending)
		},
	}
	s, err := Open(t.TempDir(), Config{hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, func() { armed.Store(true) }
}

func event() eventstore.EventData {
	return eventstore.EventData{ID: uuid.New(), Type: "test.v1", Data: []byte(`{}`)}
}

func mustAppend(t *testing.T, s *Store, stream string, expected eventstore.ExpectedRevision) {
	t.Helper()
	if _, err := s.Append(context.Background(), stream, expected, event()); err != nil {
		t.Fatal(err)
	}
}

// inParallel runs each call in its own goroutine and returns their errors in order.
func inParallel(calls ...func() error) []error {
	errs := make([]error, len(calls))
	done := make(chan struct{})
	for i, call := range calls {
		go func() {
			errs[i] = call()
			done <- struct{}{}
		}()
	}
	for range calls {
		<-done
	}
	return errs
}

func answered(r *request) bool {
	select {
	case <-r.Done:
		return true
	default:
		return false
	}
}

// A refusal of a stream that the rest of the batch leaves alone does not wait for the batch's
// sync, and a multi-stream append refused so writes none of its streams.
func TestRefusalOfAStreamTheBatchLeavesAloneIsAnsweredBeforeTheSync(t *testing.T) {
	early := map[string]bool{} // by first stream: answered before COMMIT
	s, arm := pairedStore(t, func(pending []*request) error {
		for _, r := range pending {
			early[r.Appends[0].Stream] = answered(r)
		}
		return nil
	})
	ctx := context.Background()
	mustAppend(t, s, "a", eventstore.NoStream) // a is at revision 0
	arm()
	errs := inParallel(
		func() error { _, err := s.Append(ctx, "b", eventstore.NoStream, event()); return err },
		func() error {
			_, err := s.MultiStreamAppend(ctx,
				eventstore.StreamAppend{Stream: "c", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}},
				eventstore.StreamAppend{Stream: "a", Expected: eventstore.Exact(5), Events: []eventstore.EventData{event()}})
			return err
		},
	)
	if errs[0] != nil {
		t.Fatalf("append to b: %v", errs[0])
	}
	var wrong *eventstore.WrongExpectedRevisionError
	if !errors.As(errs[1], &wrong) || wrong.Stream != "a" || wrong.Actual != eventstore.Exact(0) {
		t.Fatalf("append to c and a@5: %v, want a wrong expected revision of a, actual 0", errs[1])
	}
	if len(early) != 2 {
		t.Fatalf("the batch held %d requests, want 2", len(early))
	}
	if !early["c"] {
		t.Error("the refusal waited for the batch's commit")
	}
	if early["b"] {
		t.Error("the append to b was answered before its commit")
	}
	for _, err := range s.ReadStream(ctx, "c", eventstore.ReadStreamOptions{}) {
		if !errors.Is(err, eventstore.ErrStreamNotFound) {
			t.Errorf("reading c: %v, want stream not found", err)
		}
	}
}

// Of two appends to one stream at one revision in one batch, the loser is answered after the
// winner's commit, with the winner's revision, which a read then finds.
func TestLoserInTheWinnersBatchIsAnsweredAfterItsCommit(t *testing.T) {
	var early []bool
	s, arm := pairedStore(t, func(pending []*request) error {
		for _, r := range pending {
			early = append(early, answered(r))
		}
		return nil
	})
	ctx := context.Background()
	mustAppend(t, s, "a", eventstore.NoStream)
	arm()
	appendAt0 := func() error { _, err := s.Append(ctx, "a", eventstore.Exact(0), event()); return err }
	errs := inParallel(appendAt0, appendAt0)
	if len(early) != 2 || early[0] || early[1] {
		t.Errorf("answered before the commit: %v, want neither", early)
	}
	lost := errs[0]
	if lost == nil {
		lost = errs[1]
	}
	var wrong *eventstore.WrongExpectedRevisionError
	if !errors.As(lost, &wrong) || wrong.Actual != eventstore.Exact(1) || (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("appends: %v, want one success and one refusal with actual 1", errs)
	}
	if got := lastRevision(t, s, "a"); got != 1 {
		t.Errorf("read after the refusal: last revision %d, want 1", got)
	}
}

// A commit that fails takes back the refusals that named its revisions: the loser hears that
// the store failed, not of a revision that was never written.
func TestFailedCommitTakesBackItsRefusals(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	s, arm := pairedStore(t, func([]*request) error {
		if fail.Swap(false) {
			return errors.New("sync failed")
		}
		return nil
	})
	ctx := context.Background()
	mustAppend(t, s, "a", eventstore.NoStream)
	arm()
	appendAt0 := func() error { _, err := s.Append(ctx, "a", eventstore.Exact(0), event()); return err }
	for i, err := range inParallel(appendAt0, appendAt0) {
		if !errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, eventstore.ErrWrongExpectedRevision) {
			t.Errorf("append %d: %v, want only unavailable", i, err)
		}
	}
	if got := lastRevision(t, s, "a"); got != 0 {
		t.Errorf("last revision %d after the failed commit, want 0", got)
	}
}

func lastRevision(t *testing.T, s *Store, stream string) uint64 {
	t.Helper()
	var rev uint64
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}
	for e, err := range s.ReadStream(context.Background(), stream, opts) {
		if err != nil {
			t.Fatal(err)
		}
		rev = e.Revision
	}
	return rev
}

// The transaction being committed publishes the streams it appends to that existed before it.
func TestCommitPublishesTheStreamsItAppendsTo(t *testing.T) {
	var seen map[string]flightStream
	var s *Store
	s, arm := pairedStore(t, func([]*request) error {
		if f := s.flight.Load(); f != nil {
			seen = f.streams
		}
		return nil
	})
	ctx := context.Background()
	mustAppend(t, s, "a", eventstore.NoStream)
	arm()
	errs := inParallel(
		func() error { _, err := s.Append(ctx, "a", eventstore.Exact(0), event(), event()); return err },
		func() error { _, err := s.Append(ctx, "b", eventstore.NoStream, event()); return err },
	)
	if errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	first := lastEvent(t, s, "a", 1)
	want := map[string]flightStream{"a": {before: 0, after: 2, firstID: first}}
	if len(seen) != 1 || seen["a"] != want["a"] {
		t.Errorf("published %v, want %v (b is new)", seen, want)
	}
	if s.flight.Load() != nil {
		t.Error("still published after the commit")
	}
}

// An append at the revision that the transaction being committed appends from waits for its
// end, and is refused then with the revision it left, or handed to the writer if it did not
// commit; an append of the transaction's first event, or at another revision, does not wait.
func TestAppendAtTheRevisionBeingCommittedAwaitsItsEnd(t *testing.T) {
	ctx := context.Background()
	rival := uuid.New()
	for _, c := range []struct {
		name      string
		expected  eventstore.ExpectedRevision
		first     uuid.UUID
		committed bool
		waits     bool
		refused   bool
	}{
		{"Loser", eventstore.Exact(4), uuid.New(), true, true, true},
		{"FailedCommit", eventstore.Exact(4), uuid.New(), false, true, false},
		{"Repeat", eventstore.Exact(4), rival, true, false, false},
		{"OtherRevision", eventstore.Exact(3), uuid.New(), true, false, false},
		{"NoStream", eventstore.NoStream, uuid.New(), true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			waiting := make(chan struct{})
			s := &Store{cfg: Config{hooks: &testHooks{awaiting: func() { close(waiting) }}}}
			f := &flight{streams: map[string]flightStream{"a": {before: 4, after: 6, firstID: rival}}, done: make(chan struct{})}
			s.fly(f)
			result := make(chan error, 1)
			go func() { result <- s.awaitRival(ctx, "a", c.expected, c.first) }()
			if !c.waits {
				if err := <-result; err != nil {
					t.Fatalf("awaitRival = %v, want nil", err)
				}
				select {
				case <-waiting:
					t.Error("waited for the commit")
				default:
				}
				return
			}
			select {
			case <-waiting:
			case err := <-result:
				t.Fatalf("awaitRival = %v without waiting for the commit", err)
			}
			s.land(f, c.committed)
			err := <-result
			var wrong *eventstore.WrongExpectedRevisionError
			switch {
			case c.refused && (!errors.As(err, &wrong) || wrong.Actual != eventstore.Exact(6)):
				t.Errorf("awaitRival = %v, want a refusal with actual 6", err)
			case !c.refused && err != nil:
				t.Errorf("awaitRival = %v, want nil", err)
			}
		})
	}
}

func lastEvent(t *testing.T, s *Store, stream string, revision uint64) uuid.UUID {
	t.Helper()
	for e, err := range s.ReadStream(context.Background(), stream, eventstore.ReadStreamOptions{From: revision, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	t.Fatalf("no event %d in %s", revision, stream)
	return uuid.Nil
}

// A multi-stream append whose new streams' rows are inserted as they are checked, and which a
// later append of it refuses (a wrong expected revision, or an event id another stream holds),
// leaves none of those rows: its streams stay missing, can be created afterwards from revision
// 0, and the append batched with it commits.
func TestRefusedMultiStreamAppendLeavesNoNewStream(t *testing.T) {
	var paired atomic.Bool // the writer waits for two requests before it writes a batch
	s, err := Open(t.TempDir(), Config{hooks: &testHooks{gather: func(n int) bool { return paired.Load() && n < 2 }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	taken := event()
	if _, err := s.Append(ctx, "taken", eventstore.NoStream, taken); err != nil {
		t.Fatal(err)
	}
	paired.Store(true)
	refused := []eventstore.StreamAppend{
		{Stream: "new-a", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}},
		{Stream: "new-b", Expected: eventstore.NoStream, Events: []eventstore.EventData{event(), event()}},
		{Stream: "taken", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}},
	}
	errs := inParallel(
		func() error { _, err := s.MultiStreamAppend(ctx, refused...); return err },
		func() error { _, err := s.Append(ctx, "other", eventstore.NoStream, event()); return err },
	)
	paired.Store(false)
	var wrong *eventstore.WrongExpectedRevisionError
	if !errors.As(errs[0], &wrong) || wrong.Stream != "taken" || wrong.Actual != eventstore.Exact(0) {
		t.Fatalf("multi-stream append with taken@NoStream: %v; want a wrong expected revision of taken, actual 0", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("append batched with the refused one: %v", errs[1])
	}
	_, err = s.MultiStreamAppend(ctx,
		eventstore.StreamAppend{Stream: "new-c", Expected: eventstore.NoStream, Events: []eventstore.EventData{event()}},
		eventstore.StreamAppend{Stream: "new-d", Expected: eventstore.Any, Events: []eventstore.EventData{taken}})
	if !errors.Is(err, eventstore.ErrDuplicateEventID) {
		t.Fatalf("multi-stream append of taken's event to new-d: %v; want a duplicate event id", err)
	}
	for _, stream := range []string{"new-a", "new-b", "new-c", "new-d"} {
		for _, err := range s.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}) {
			if !errors.Is(err, eventstore.ErrStreamNotFound) {
				t.Fatalf("read %s after the refusals: %v; want it not found", stream, err)
			}
		}
	}
	var rows int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM streams`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("stream rows after the refusals: %d, %v; want taken's and other's", rows, err)
	}
	created := refused[:2]
	results, err := s.MultiStreamAppend(ctx, created...)
	if err != nil || results[0].Revision != 0 || results[1].Revision != 1 {
		t.Fatalf("creating new-a and new-b afterwards: %v, %v; want revisions 0 and 1", results, err)
	}
	again, err := s.MultiStreamAppend(ctx, created...)
	if err != nil || again[0].Fate != eventstore.FateRepeated || again[1].Fate != eventstore.FateRepeated || again[1].Position != results[1].Position {
		t.Fatalf("the same creation again: %v, %v; want both repeated at %v", again, err, results)
	}
}
