// Package kurrent is the KurrentDB (EventStoreDB) backend of the event store, a thin
// translation onto EventStore-Client-Go/v4. It is the only package that imports the client.
//
// # Translation
//
// Expected revisions map one to one (Any, NoStream, StreamExists, Exact → StreamRevision), a
// Position is KurrentDB's commit and prepare positions, and a stream read is a gRPC read that
// streams its events as the caller takes them. ReadAll and SubscribeAll read $all; they never
// yield events of system streams (names starting with "$", which include the "$$name" metadata
// streams). SubscribeAll is a catch-up subscription with a server-side regular expression on
// stream names; ReadAll filters on the client, because the client offers no filter for reads of
// $all. Head is the position of the last event of $all outside the system streams. DeleteStream
// is a soft delete. Errors are translated in one function (translate).
//
// Subscriptions resume from the position of the last event they yielded, never from a
// checkpoint (KurrentDB issue #4970: a filtered subscription's checkpoint can point past the
// last event, and the next event written takes that position), and subscribe again with
// backoff when the connection drops. A client that gave up rediscovering its node after a drop
// closes itself for good; the store then replaces it.
//
// # Where KurrentDB and the contract differ
//
//   - Event ids are not unique in the store: KurrentDB stores an id that another stream (or an
//     earlier, non-repeated append) holds. Repeats are recognised as the contract says with an
//     exact expected revision (NoStream included), which is what order appends and key claims
//     use; with Any or StreamExists only within KurrentDB's idempotency window (a bounded cache
//     of recent ids, emptied by a restart). The conformance suite runs with
//     SkipGlobalEventIDUniqueness and does not run its test of unique ids (Options.NotRun).
//   - A soft-deleted stream keeps its last revision for KurrentDB: an append at Exact(last
//     revision) succeeds and recreates it, where the contract says a deleted stream has no
//     revision and the append fails. DeleteStream checks first and so keeps the contract; Append
//     cannot without a read per append, and does not. In this service it would take a request
//     that holds an idempotency key across the key's whole TTL for Complete to hit an expired,
//     deleted key stream; the key stream it recreates (a Completed event without its Claimed)
//     reads as expired and is deleted again. The suite's row for this case is skipped.
//   - WrongExpectedRevisionError.Actual is read after the failure (the client gives KurrentDB's
//     current revision only as text, and for a soft-deleted stream KurrentDB reports its last
//     revision where the contract says NoStream): it is the stream's state just after the
//     failure, which a concurrent writer may already have moved.
//   - KurrentDB refuses an append larger than its --max-append-size (1 MiB by default) as an
//     invalid argument. The suite appends a 1 MiB event: run it against a server started with
//     --max-append-size=4194304.
//   - Deleted streams stay in $all, with their events, until a scavenge; the embedded store
//     removes them at once. A stream read answers not found either way.
//   - A stream all of whose events are hidden by its metadata ($maxAge, $maxCount, $tb) reads
//     as not found, like a deleted one, but KurrentDB still holds its last revision and refuses
//     an append with NoStream. Append then appends at that revision, which the client reports
//     only in the error's text: the contract's NoStream holds, and the stream's revisions go
//     on (see key-stream expiry below). Append with an exact revision still takes the last
//     revision of such a stream, as for a deleted one, and StreamExists takes the stream for
//     one that exists; DeleteStream looks first and keeps the contract. A read of such a
//     stream from past its first revision finds no event rather than not found. The suite's
//     rows for these cases are not run.
//
// # Key-stream expiry and $maxAge
//
// A stream's maximum age (eventstore.StreamAppend.MaxAge) is its $maxAge, in whole seconds,
// rounded up: eventstore.Write sets it (SetMaxAge) just before the append, as the client has
// no multi-stream append to carry it with. Package idempotency so gives each key stream the
// key's TTL; the age counts from each event's creation, so an event is hidden only after its
// key expired. Nothing on this backend deletes expired streams: KurrentDB hides them.
//
// Between expiry and scavenge an expired key's events are still on disk and in $all, but stream
// reads no longer return them: the key stream reads as not found, and a request with the key is
// a new request. Its claim, an append with NoStream, is refused by KurrentDB, which keeps the
// stream's last revision through expiry and scavenges; Append then claims at that revision (see
// hidden for why it first writes the stream's metadata again), so of two racing claims one
// wins, as for a new key. If only some of the key's events are hidden (its Claimed expired, a
// later Completed not yet), the key reads without its claim, which package idempotency takes
// for expired: it claims the key anew at the stream's revision, and the fold of the stream
// starts the key's new life there.
//
// A scavenge removes the expired events from disk and from $all; until then readers of $all
// (the read models, and the $all subscriptions of every node) see them as they saw them when
// they were written, and a rebuild replays them: the lookups read model keeps a key's row, with
// its expiry, whether the key's events are hidden, deleted or scavenged, until a day past its
// expiry (projections.KeyRowsKept). A key stream's metadata
// stream ("$$" + the stream) keeps its last event through scavenges, as for any stream whose
// metadata was set or which was deleted: a few dozen bytes per key ever claimed stay.
package kurrent
