// Package eventstore defines the event store contract shared by every backend, modelled on
// KurrentDB's semantics so that a KurrentDB backend is a thin translation.
//
// A store holds streams, named by non-empty strings. Events in a stream have revisions that
// start at 0 and grow by one. Every event of the store also has a Position in the global log;
// positions grow in commit order, may have gaps, and are comparable with Position.Compare.
//
// Appends name the revision they expect the stream to be at (Any, NoStream, StreamExists or
// Exact). A mismatch fails with a *WrongExpectedRevisionError, which matches
// ErrWrongExpectedRevision under errors.Is.
//
// Appends with an exact expected revision (NoStream counts as exact: "before the stream's first
// revision") are idempotent: if the events that follow the expected revision in the stream have
// the ids of the events being appended, in order, the append succeeds, writes nothing and
// returns the result of the append that wrote them (the revision and position of the last of
// them); later events after them do not matter. If only some of them match, it fails with a
// wrong-expected-revision error. With Any or StreamExists a repeat is recognised by its first
// event id. Event ids are unique in the whole store: an id stored anywhere else fails with
// ErrDuplicateEventID.
//
// Reads see every append that has returned nil: an acknowledged event is readable at once,
// from its stream and from the global log.
//
// A deleted stream reads as not found (ErrStreamNotFound) and behaves as NoStream for expected
// revision checks; appending to it recreates it, and its revisions continue after the last
// revision it had before the delete, as in KurrentDB.
//
// A stream may have a maximum age, set with an append (StreamAppend.MaxAge), as KurrentDB's
// $maxAge: stream reads leave out its events older than that, and once they all are, the
// stream is expired and reads and takes appends as a deleted one. Stores forget expired
// streams by themselves, so streams that live for a while (idempotency keys) need no sweeper.
//
// The conformance suite every backend runs lives in package eventstoretest.
package eventstore
