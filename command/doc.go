// Package command runs order commands against the event store: it loads an order by folding
// its stream, decides the command with the pure domain, and appends the new events with the
// exact revision it read.
//
// A command runs in two steps: Plan loads, decides and encodes, and returns the appends that
// make its effect, unmade; whoever makes them tells the plan what the store did
// (Plan.Written), which ends it or has it decided again. Handle makes them itself; the
// keyed pipeline makes them with its key's record, in the same atomic append.
//
// Every appended event carries Metadata (principal, idempotency key, request fingerprint,
// correlation and causation ids, command name, time). With an idempotency key, event ids are
// derived from the principal, the key, the order and the event's index (UUIDv5), so that an
// append repeated after a lost answer is recognised by the store itself; without a key they
// are random. While folding, the handler notes where each key's events are, so a command whose
// key is already in the order's stream is answered from there instead of run again: this
// holds after the key's own record has expired too.
//
// What must lead to one order of a principal, a create's client reference and the payment id
// a payment starts, is claimed as keys are: an event in a stream named after it, appended with
// expected revision "no stream" and with the order's events, where the store can, in one step
// (clientref.go, paymentid.go). A refused claim is read: this order's is a retry, another's
// refuses the command.
package command
