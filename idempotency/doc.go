// Package idempotency makes every command with an Idempotency-Key take effect once and answers
// its retries with the first outcome.
//
// A key lives in its own event stream, claimed by an append with expected revision NoStream;
// its events put it in one Phase, and decide, a pure function of the phase, the request's
// fingerprint and what this process holds of the key, gives a request its next Step
// (TestDecide is the whole table). Pipeline.Do is the one way a keyed write runs, a command
// on an order or a webhook endpoint's registration (Work): Keys.Begin takes the steps until the
// request holds a claim or has its answer, the write is planned (command.Handler.Plan,
// webhooks.Endpoints.PlanRegistration), and the pipeline makes the one append and records the
// outcome. Completed keys are remembered in memory, bounded in bytes (Keys.RememberBytes); the
// sweeper (Keys.Sweep) deletes expired keys on the embedded store, KurrentDB expires them itself
// (Keys.Expire).
//
// The design, with why each step is safe and the tests that show it, is docs/design.md §1.
package idempotency
