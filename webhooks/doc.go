// Package webhooks pushes order events to the endpoints clients register, signed as Standard
// Webhooks, at least once and in log order per order, with the event's id as the webhook-id on
// every attempt so that a receiver stays exactly-once by storing one id.
//
// # Endpoints
//
// An endpoint lives in its own stream (webhook-endpoint-<id>): its registration, secret
// rotations, disable, enable and delete are events, audited like every other. The index stream
// (webhook-index) names every endpoint changed, so a node reads the endpoints without reading
// the log; a node also follows the log for endpoint events, so a change made on another node
// is seen at once. Signing secrets are stored sealed with AES-256-GCM under a key kept outside
// the data directory (Sealer): a copy of the data directory does not reveal them. A
// principal's endpoints are counted against Config.MaxEndpoints in its slot stream, claimed at an
// exact revision before the registration, so the limit holds across nodes (see slots.go). A
// registration is planned (Registration) and made by the keyed pipeline, with the record
// of the request's Idempotency-Key.
//
// # Deliveries
//
// A runner per endpoint follows the log after the endpoint's registration (earlier events are
// never sent), keeps the events of its principal's orders of the types it subscribes to as
// pending deliveries (at most Config.MaxPending, and of those not failed at most 8 ×
// Config.MaxInFlight: the rest waits in the log, so the checkpoint stays small), and sends the first pending delivery of each
// order (so one order's events arrive in log order), several orders at once (at most
// Config.MaxInFlight). Its state is a checkpoint in the endpoint's delivery stream
// (webhook-delivery-<id>): the log position read up to, and every delivery not yet done, with
// its attempts. A checkpoint is appended whenever the state changed, one append at a time, at
// the exact revision of the previous one. After a crash the next runner starts from the last
// checkpoint: it re-sends only what was pending then (in flight, or done since but not yet
// checkpointed), with the same webhook-id.
//
// # One reader of the log per node
//
// The node reads the log once for all its runners (Service.watch, one subscription): it hands
// each order event to the runners of the event's principal that follow it, into a buffer of at
// most Config.TailBuffer deliveries per runner, which the runner takes as Pending has room. A
// runner reads the log on its own from its cursor while it is behind (new, taken over, enabled
// again); once a read reaches the end of the log at or past the last event handed out, it
// follows the reader, skipping what it has read already. A runner whose buffer would overflow
// (a slow or dead endpoint, whose Pending is full) is dropped and reads on its own again: the
// reader never waits for a runner. Either way the cursor moves only past events taken into
// Pending, so the checkpoint and ordering are the same whichever way an event arrived.
//
// # Lease
//
// Each checkpoint names its node, which holds the endpoint's lease (package lease, as a key's
// claim does); it renews the lease by
// appending a checkpoint at least every third of Config.Lease. No wall clock is compared
// between nodes: another node takes the endpoint over once it has seen the delivery stream's
// last revision stay unchanged for Config.Lease by its own monotonic clock, by appending its
// own checkpoint at the next exact revision, so of two nodes exactly one succeeds; a node whose
// append is refused has lost the lease and stops. The holder counts its lease from before the
// append that renewed it, on its own monotonic clock, and starts an attempt only while the
// lease outlasts the attempt's timeout: a taker, which sees the revision only after that
// append, waits longer, so no delivery is in flight from two nodes at once (clocks may disagree
// on the time of day, not on how long a lease lasts). On the embedded store, which one process
// holds, a lease left by a dead process is taken over at once (Config.SingleNode).
//
// # Retries and dead letters
//
// A failed attempt is retried on Config.Schedule (with up to 20% jitter); a delivery whose last
// attempt failed, or that got 410 Gone, is dead-lettered in webhook-dead-<id>, where a retry by
// hand is asked for too. Past Config.MaxDeadLetters events that stream is truncated to its
// latest three quarters of them (see boundDeadLetters), as the delivery stream is to its last
// checkpoint every thousand (see compact). An
// endpoint failing for Config.DisableAfter without a success is disabled; enabling it resumes
// from its checkpoint.
package webhooks
