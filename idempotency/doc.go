// Package idempotency makes every command with an Idempotency-Key take effect once and answers
// its retries with the first outcome.
//
// # The key's life
//
// A key lives in its own event stream, named from the principal and a hash of the key. The
// first request claims it by appending a Claimed event with expected revision NoStream: the
// store's optimistic concurrency is the unique constraint, so of two racing requests exactly one
// claims. The claim records the request's fingerprint (method, path, canonical body), the order
// it targets (drawn at claim time for a create, so a takeover reuses it), the claimant, a lease
// and the key's expiry. The outcome (status, problem code, the headers that matter, the body
// byte for byte) is appended as Completed at the exact revision of the claim; a 5xx is
// appended as Released instead, so that a retry runs the command again.
//
// The events of a key stream put it in one Phase: Unclaimed, Running (claimed, lease running),
// Abandoned (released, or its lease is over), Finished (outcome recorded) or Expired (older
// than the TTL). decide, a pure function of the phase, the request's fingerprint and what this
// process itself holds of the key (Holding), gives a request its next Step: claim, replay,
// wait, take over, refuse (fault.KeyReused) or forget (delete the expired key, then it is new).
// TestDecide is the whole table.
//
// # One pipeline
//
// Pipeline.Do is the one way a keyed command runs, whatever brought it in: Keys.Begin takes the
// steps until the request holds a claim or has its answer; the command is planned on its order
// (command.Handler.Plan) and the pipeline makes the plan's appends, with the key's claim where
// the store takes them in one step; the outcome, rendered by the intake's pure Command.Render,
// is recorded, or the key let go. A waiting request
// first looks in the order's own stream, where events carry their key, after its first wait:
// a holder that died after its append left the effect there, and the record is completed
// from it rather than after the lease. A request that outlived its lease records nothing
// (ErrTakenOver): it may have decided on an older state of the order than its taker.
//
// An answer is given before its outcome is recorded only when the order's stream holds it
// word for word, with the key's events this run wrote (command.Result.Written): should the record
// never land, the next retry rebuilds the very same answer from there. Every other answer is
// recorded before it is given, and an answer that cannot be recorded is not given.
//
// The lease is not what prevents a second effect: command events carry the key and ids derived
// from it, and are appended at the exact revision decided on, so even a takeover racing a slow
// first request appends the command once (see package command). The lease only bounds how long
// a retry waits for a request that died.
//
// # Shortcuts that change no answer
//
// A new key's claim is not written on its own where the store appends to several streams at
// once (eventstore.MultiStreamAppender): Begin leaves it to the pipeline (Request.Defer), which
// appends it with the plan's, or with the outcome if the command appends nothing; if
// the store refuses it because the key exists after all, nothing was written and Do starts
// again without deferring. A command that creates its order in that append records its outcome
// there too (Claim.AppendWithOutcome), in the claim's own event (Recorded), and is then one write of
// one key event: a new order's stream holds no other run's events, so what was decided is what
// is written, and the outcome is known before the append but for the order's log position
// (Outcome.Position), which a replay from the store takes from the order's event it names (At).
// Keys of earlier releases, a claim and an outcome in two events, read the same. Completed keys are kept in memory, bounded in bytes
// (Keys.RememberBytes), in a compact form (digests for the stream and fingerprint, the headers
// and body as two strings): a completed key never changes until it expires, so its replays read
// nothing. A key completed here also keeps the digest of its request's bytes: a retry with the
// very same bytes has the same fingerprint, and is replayed without computing it
// (Keys.RecallBytes).
// A duplicate of a request this process runs waits for it without reading, woken when its
// outcome is recorded. The sweeper's fixed-size table of claimed keys has Begin read a key
// first that was claimed before, rather than claim it.
//
// # Expiry
//
// A key older than the TTL is new again. On the embedded store the sweeper (Keys.Sweep) walks
// the log from the oldest claim not yet swept and deletes expired key streams, holding only a
// position in memory; it retries a failed round with backoff and reports lasting failure
// (Keys.SweepErr). On KurrentDB the store expires keys itself (Keys.Expire, $maxAge).
package idempotency
