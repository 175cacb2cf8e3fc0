package eventstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
)

// Store appends to, reads and deletes streams.
type Store interface {
	// Append writes events to the end of stream if the stream is at the expected revision.
	// When it returns nil the events are durable. It returns a *WrongExpectedRevisionError,
	// or an error matching ErrInvalidArgument, ErrDuplicateEventID, ErrUnavailable, ErrClosed
	// or the context's error. An append cancelled by its context may still have been written;
	// retrying it with the same event ids and an exact expected revision is safe.
	Append(ctx context.Context, stream string, expected ExpectedRevision, events ...EventData) (AppendResult, error)

	// ReadStream yields the events of a stream in revision order, fetching them in pages.
	// A missing or deleted stream yields one error matching ErrStreamNotFound. An error ends
	// the sequence.
	ReadStream(ctx context.Context, stream string, opts ReadStreamOptions) iter.Seq2[RecordedEvent, error]

	// DeleteStream deletes a stream if it is at the expected revision. Deleting a missing
	// stream with Any or NoStream does nothing and succeeds.
	DeleteStream(ctx context.Context, stream string, expected ExpectedRevision) error

	// Truncate removes stream's events before revision before, as KurrentDB's $tb (truncate
	// before) does: reads of the stream start at before, its last revision and the appends
	// after it are as they were, and at least its last event stays, so the stream goes on.
	// before past the last revision is ErrInvalidArgument; a missing stream is
	// ErrStreamNotFound. Whether ReadAll still yields the removed events is the store's (the
	// embedded store removes them; KurrentDB keeps them until a scavenge), and an append of the
	// ids of removed events is not recognised as a repeat.
	Truncate(ctx context.Context, stream string, before uint64) error

	// Ping reaches the backend as a read does, without reading events: the embedded store
	// asks its file, KurrentDB answers a call. It fails as a read would, with ErrClosed once
	// the store is closed: what a readiness probe asks.
	Ping(ctx context.Context) error
}

// MultiStreamAppender is a Store that appends to several streams in one atomic step, as
// KurrentDB's multi-stream append does. The embedded store is one; callers make one Append
// per stream on a store that is not.
type MultiStreamAppender interface {
	// MultiStreamAppend makes each append as Append would, and sets the maximum age of the
	// streams of those with a MaxAge (see StreamAppend.MaxAge), all or nothing: when it returns nil,
	// the events of every append are durable (written, or found stored by an earlier append of
	// the same ids, as Append answers a repeat), and results[i] is appends[i]'s. When it
	// returns an error, none of them was written, except that an append cancelled by its
	// context may still have been written whole. A *WrongExpectedRevisionError names the
	// stream whose expected revision did not match. Naming a stream twice, or none, matches
	// ErrInvalidArgument, and so does a negative MaxAge; the other errors are Append's.
	//
	// A call is a repeat only as a whole: when some of its appends repeat an earlier append's
	// events and others are new, the first repeated one is refused as a
	// *WrongExpectedRevisionError, as if those events were another's. Its events were written
	// with other appends than the ones this call pairs them with (see PartialRepeat).
	MultiStreamAppend(ctx context.Context, appends ...StreamAppend) (results []AppendResult, err error)
}

// PartialRepeat returns the index of the first append of a multi-stream append that repeats
// an earlier one's events while another append of it is new, or -1: results are the
// appends' as checked, FateRepeated for a repeat. A caller that writes the record of its
// decision with its events (an idempotency key's outcome) can then trust that, written, the
// events are the ones it decided.
func PartialRepeat(results []AppendResult) int {
	repeat, written := -1, false
	for i, r := range results {
		switch {
		case r.Fate != FateRepeated:
			written = true
		case repeat < 0:
			repeat = i
		}
	}
	if written {
		return repeat
	}
	return -1
}

// StreamAppend is one stream's part of a MultiStreamAppend, or an append of Write.
type StreamAppend struct {
	Stream   string
	Expected ExpectedRevision
	Events   []EventData

	// MaxAge, when above 0, sets the stream's maximum age with the append, for the stream from
	// then on (until another MaxAge replaces it); 0 leaves the stream's as it is (none for a
	// new stream), and a negative one is ErrInvalidArgument. The semantics are KurrentDB's
	// $maxAge:
	//
	//   - ReadStream does not return an event once it is older than the stream's maximum age,
	//     counted from when it was recorded, whenever the age was set: a shorter one hides
	//     older events at once.
	//   - A stream whose events are all past it (its last one is) is expired: it reads as not
	//     found, and counts as a deleted stream for expected revisions: it takes an append
	//     with NoStream or Any, whose revisions go on after its last; StreamExists and an exact
	//     revision, its last one included, are refused with Actual NoStream. A stream recreated
	//     so keeps its maximum age.
	//   - ReadAll and SubscribeAll may still yield the events of an expired stream until the
	//     store forgets them, and until then their ids stay taken: the embedded store and
	//     PostgreSQL forget expired streams a few at a time with their writes; KurrentDB keeps
	//     them in $all until a scavenge.
	//
	// A store may round the age up: KurrentDB to whole seconds, PostgreSQL to microseconds.
	MaxAge time.Duration
}

// MaxAgeSetter is a Store that sets a stream's maximum age apart from an append, as KurrentDB
// does in the stream's metadata. Write calls it, on a store that is not a MultiStreamAppender,
// for an append with a MaxAge.
type MaxAgeSetter interface {
	// SetMaxAge sets stream's maximum age to d, with the semantics of StreamAppend.MaxAge,
	// whether the stream exists yet or not. A d of 0 or less, or an empty stream name, is
	// ErrInvalidArgument; the other errors are Append's.
	SetMaxAge(ctx context.Context, stream string, d time.Duration) error
}

// Feed is the global log, for projections.
type Feed interface {
	// ReadAll yields events of the global log from opts.From (inclusive), in order, and ends.
	ReadAll(ctx context.Context, opts ReadAllOptions) iter.Seq2[RecordedEvent, error]

	// SubscribeAll yields every event after opts.After in log order: first those already
	// stored, then each new one as it commits, with no gap and no duplicate. It ends only with
	// an error: the context's when it is cancelled, ErrClosed when the store closes.
	SubscribeAll(ctx context.Context, opts SubscribeOptions) iter.Seq2[RecordedEvent, error]

	// Head returns the position of the last event of the log, or Start when it is empty.
	Head(ctx context.Context) (Position, error)
}

// Direction orders a stream read.
type Direction uint8

const (
	Forwards Direction = iota
	Backwards
)

// ReadStreamOptions selects events of one stream.
type ReadStreamOptions struct {
	Direction Direction
	// From is the first revision to yield. With Backwards, End starts at the last event.
	From uint64
	// Limit caps the number of events yielded; 0 means no limit.
	Limit uint64
}

// ReadAllOptions selects events of the global log.
type ReadAllOptions struct {
	From   Position // inclusive
	Limit  uint64   // 0 means no limit
	Filter Filter
}

// SubscribeOptions selects events of a subscription to the global log.
type SubscribeOptions struct {
	After  Position // exclusive; Start for the whole log
	Filter Filter
}

// Filter selects events by stream name. The zero Filter selects everything.
type Filter struct {
	// StreamPrefixes, when not empty, keeps only streams whose name starts with one of them.
	StreamPrefixes []string
	// ExcludeStreamPrefixes drops streams whose name starts with one of them.
	ExcludeStreamPrefixes []string
}

// Match reports whether f selects events of stream.
func (f Filter) Match(stream string) bool {
	for _, p := range f.ExcludeStreamPrefixes {
		if strings.HasPrefix(stream, p) {
			return false
		}
	}
	if len(f.StreamPrefixes) == 0 {
		return true
	}
	for _, p := range f.StreamPrefixes {
		if strings.HasPrefix(stream, p) {
			return true
		}
	}
	return false
}

// First returns the first event of stream in s; found is false if the stream does not exist
// (or holds no event).
func First(ctx context.Context, s Store, stream string) (e RecordedEvent, found bool, err error) {
	return one(ctx, s, stream, "first", ReadStreamOptions{Limit: 1})
}

// Last returns the last event of stream in s; found is false if the stream does not exist
// (or holds no event).
func Last(ctx context.Context, s Store, stream string) (e RecordedEvent, found bool, err error) {
	return one(ctx, s, stream, "last", ReadStreamOptions{Direction: Backwards, From: End, Limit: 1})
}

// one returns the event of stream that opts read first, named which in an error.
func one(ctx context.Context, s Store, stream, which string, opts ReadStreamOptions) (RecordedEvent, bool, error) {
	for e, err := range s.ReadStream(ctx, stream, opts) {
		if errors.Is(err, ErrStreamNotFound) {
			break
		}
		if err != nil {
			return RecordedEvent{}, false, fmt.Errorf("read the %s event of %s: %w", which, stream, err)
		}
		return e, true, nil
	}
	return RecordedEvent{}, false, nil
}

// Write makes appends: all or nothing, in one step, where s appends to several streams at once
// (MultiStreamAppender); else one after the other, in order, up to the first refusal. It
// returns the result of each, or that refusal, which names its stream.
//
// An append with a MaxAge goes through MultiStreamAppend on a store that has it, even alone,
// so that the age is set in the append's own step. On another store Write sets the stream's
// maximum age (MaxAgeSetter) just before the append, where a refusal of the append leaves it
// set; a store that cannot set one fails the call with ErrInvalidArgument, writing nothing.
func Write(ctx context.Context, s Store, appends ...StreamAppend) ([]AppendResult, error) {
	maxAge, err := maxAges(appends)
	if err != nil {
		return nil, err
	}
	if ms, multi := s.(MultiStreamAppender); multi && (len(appends) > 1 || maxAge) {
		return ms.MultiStreamAppend(ctx, appends...)
	}
	setter, canSet := s.(MaxAgeSetter)
	if maxAge && !canSet {
		return nil, fmt.Errorf("%w: the store cannot set a stream's maximum age", ErrInvalidArgument)
	}
	results := make([]AppendResult, len(appends))
	for i, a := range appends {
		if a.MaxAge > 0 {
			if err := setter.SetMaxAge(ctx, a.Stream, a.MaxAge); err != nil {
				return nil, err
			}
		}
		res, err := s.Append(ctx, a.Stream, a.Expected, a.Events...)
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	return results, nil
}

// maxAges reports whether an append sets a maximum age, and refuses a negative one.
func maxAges(appends []StreamAppend) (bool, error) {
	set := false
	for _, a := range appends {
		if a.MaxAge < 0 {
			return false, fmt.Errorf("%w: append to %q: negative max age %v", ErrInvalidArgument, a.Stream, a.MaxAge)
		}
		set = set || a.MaxAge > 0
	}
	return set, nil
}
