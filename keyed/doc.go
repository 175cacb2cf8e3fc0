// Package keyed runs every keyed write once per key: a command on an order, a webhook
// endpoint's registration or rotation, a provider's event recorded in the provider log
// (Work). Pipeline.Do answers a retry from the memory of completed keys or the key's record,
// holds the key for a new request (idempotency.Keys.Begin), plans the work without writing,
// and makes one write: on a store that appends to several streams at once, the key's record
// (its claim and outcome in one event) and the plan's appends in one atomic append (atomic.go);
// on one that cannot (KurrentDB), the claim first, then the appends, then the outcome
// (claimfirst.go). It sits above the works it runs (command, webhooks, providers) and below
// the intakes (api); the key protocol it follows is package idempotency's, which knows no
// order. docs/design.md §1 explains both writes and why each is safe.
package keyed
