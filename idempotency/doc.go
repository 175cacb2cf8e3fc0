// Package idempotency is the key protocol: an Idempotency-Key's form, the fingerprint of its
// request, its events, and the decision of what a request with the key does next.
//
// A key lives in its own event stream, named by its principal and key (StreamName); its events
// put it in one Phase, and decide, a pure function of the phase, the request's fingerprint and
// whether a request of this process holds the key, gives a request its next Step (TestDecide
// is the whole table). Keys.Begin takes those steps, writing nothing, until the request holds
// the key (a Claim at the revision the key's record is to be written at) or has its answer
// (a replay, fault.KeyReused, ErrInFlight). The claim's holder writes the record: with the
// work's own events in one atomic append (Claim.Record, then Keys.Kept), or, on a store that
// cannot append to several streams at once, the claim first (Keys.WriteClaim, then Complete or
// Release). The key's append gives its stream the TTL as its maximum age, so the store forgets
// the key then. Completed keys are remembered in memory, bounded in bytes
// (Keys.RememberBytes).
//
// The package knows no order, endpoint or provider: the pipeline that runs keyed writes is
// package keyed. The design, with why each step is safe and the tests that show it, is
// docs/design.md §1.
package idempotency
