// Package idempotency makes every command with an Idempotency-Key take effect once and answers
// its retries with the first outcome.
//
// A key lives in its own event stream, named from the principal and a hash of the key. The
// first request claims it by appending a Claimed event with expected revision NoStream: the
// store's optimistic concurrency is the unique constraint, so of two racing requests exactly one
// claims. The claim records the request's fingerprint (method, path, canonical body), the order
// it targets (chosen at claim time for a create, so a takeover reuses it), the claimant, a lease
// and the key's expiry. When the command has run, its outcome (status, the headers that matter,
// the body byte for byte) is appended as Completed, with the exact revision of the claim. The
// caller may answer before that when the order's stream can rebuild the very same answer (see
// the next paragraph); Keys.Await lets a reader of the key wait for the outcome meanwhile.
//
// A later request with the key finds, in the key's stream:
//   - Completed: replay it, if the fingerprint matches; else ErrKeyReused.
//   - Claimed, lease running: another request is running it. The caller first looks in the
//     order's own stream, where events carry their key (a crash after the order append and
//     before Completed leaves the effect there: the caller completes the record from it); else
//     it waits, bounded, for Completed and replays it, or gets ErrInFlight.
//   - Claimed, lease expired (or Released after a 5xx): take it over by appending a new Claimed
//     with the exact revision it read; of several takers one wins.
//   - Claimed longer ago than the TTL: the key has expired; its stream is deleted and the
//     request is new. A sweeper also deletes expired key streams in the background (Keys.Sweep,
//     which walks the log from the oldest claim not yet expired, in the order keys expire),
//     unless the store expires them itself (Keys.Expire, KurrentDB's $maxAge): then an expired
//     key's events are hidden from reads, and its stream reads as not found, or without its
//     first claim, which counts as expired too.
//
// Four shortcuts spare the store without changing these answers. A new key is claimed first and
// its stream read only if the claim is refused; a key that the sweeper knows was claimed (it
// keeps a table of fixed size of the keys claimed, see Keys.Sweep) is read first. On a store that appends to
// several streams at once (eventstore.MultiStreamAppender, the embedded store), a new key is
// not even claimed on its own: Begin leaves the Claimed event to the caller (Request.Defer),
// which appends it with the command's events in one atomic append, or with the outcome if the
// command appends nothing. The claim holds the key in this process from Begin on. If its append
// is refused because the key's stream exists, nothing was written, and Begin, called again
// without Defer, reads the key as above. Completed keys are kept in memory with their
// expiry, up to a budget in bytes (Keys.RememberBytes): a completed key never changes until it
// expires, so its replays read nothing (a node whose clock runs behind keeps replaying a key
// that much past its expiry), but for an answer too large to keep, which is read from its
// stream without a claim.
// And a duplicate of a request that this process is running waits for it without reading,
// woken when its outcome is recorded (only its own key's waiters are woken).
//
// The lease is not what prevents a second effect: command events carry the key and ids derived
// from it, so even a takeover racing a slow first request appends the command once (see package
// command). The lease only bounds how long a retry waits for a request that died. What it does
// decide is whose outcome stands: a request that outlived its lease records none
// (ErrTakenOver), since it may have decided on an older state of the order than its taker.
package idempotency
