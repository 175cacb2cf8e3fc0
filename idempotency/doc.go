// Package idempotency claims Idempotency-Keys on their own event streams, stores outcomes and
// replays them on retries.
package idempotency
