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
// Appends with an exact expected revision (NoStream counts as exact: "before revision 0") are
// idempotent: if the events that follow the expected revision in the stream have exactly the ids
// of the events being appended, in order, the append succeeds, writes nothing and returns the
// original result. If only some of them match, it fails with a wrong-expected-revision error.
// Event ids are unique in the whole store.
//
// A deleted stream reads as not found (ErrStreamNotFound) and behaves as NoStream for expected
// revision checks; appending to it recreates it, and its revisions continue after the last
// revision it had before the delete, as in KurrentDB.
//
// The conformance suite every backend runs lives in package eventstoretest.
package eventstore
