// Package kurrenttest is an in-process KurrentDB test server: the gRPC services that
// EventStore-Client-Go/v4 calls for package kurrent (server features, and streams append, read,
// delete and $all subscriptions with filters), built on the generated server interfaces that ship
// in the client module and backed by the embedded store (package eventstore/sqlite).
//
// It follows KurrentDB's behaviour rather than the eventstore contract, so that running the
// conformance suite through it tests the kurrent backend's translation, not the embedded store:
//
//   - The expected-version check is KurrentDB's (the index committer's CheckCommit): Any and
//     StreamExists recognise a repeat by its first event id in a bounded, in-memory cache of
//     recent ids (the idempotency window, empty after a restart); an exact expected version below
//     the stream's last compares the ids that follow it; a partial match is a wrong expected
//     version. Event ids are not unique across streams: the same id may be stored twice.
//   - Wrong expected versions on Append are an AppendResp.WrongExpectedVersion with the current
//     and expected versions; on Delete a FailedPrecondition status with the trailers
//     "exception: wrong-expected-version", "expected-version" and "actual-version".
//   - Deletes are soft: the stream's metadata gets $tb (truncate before) = MaxInt64 in "$$name",
//     the events stay in $all, a stream read answers StreamNotFound, StreamExists answers
//     "exception: stream-deleted", and NoStream, Any or the last revision recreate the stream,
//     whose revisions go on and whose $tb moves to the first new revision.
//   - Stream metadata ($tb, $maxAge, $maxCount) set through "$$name" limits what stream reads
//     return; a metadata stream keeps only its last event ($maxCount 1), so the client's
//     GetStreamMetadata, which reads it forwards, sees the current metadata; $all still holds
//     every event, metadata events included.
//   - An append larger than Config.MaxAppendSize (KurrentDB's --max-append-size, 1 MiB by
//     default) is refused with InvalidArgument, its size counted as the events' data, custom
//     metadata and type names (KurrentDB's count differs by a few bytes per event).
//   - $all subscriptions take stream-name or event-type filters by prefix or by .NET-style regular
//     expression (lookaheads work: the expressions are evaluated with regexp2) and send a
//     checkpoint every checkpointIntervalMultiplier × window events examined.
//   - Keepalive is KurrentDB's: the client's pings every 10 s are accepted, with or without a
//     call in flight, so an idle subscription stays up; the server pings an idle client every
//     10 s and drops the connection after 10 s without an answer.
//
// What it does not do: clustering and gossip, TLS and authentication, hard deletes (Tombstone),
// BatchAppend, stream subscriptions, persistent subscriptions, projections, scavenging, and the
// ACLs in stream metadata. Positions are the embedded store's sequence numbers, with the commit
// and prepare positions equal. Reading $all backwards is done in pages and meant for short reads
// such as finding the last event.
package kurrenttest
