// Package client is the Go client of the order service: its commands, reads, problems and
// webhook deliveries, over the HTTP API that api/openapi.yaml describes.
//
// # Packaging
//
// The client is a package of the service's module, github.com/acme/orders, not a module of its
// own. It imports only the standard library, github.com/oklog/ulid/v2 and the service's error
// kinds (package fault, which imports nothing but the standard library), and a test keeps it
// so: the sentinels of the service's problems are those kinds. Go's module graph pruning means
// that a program importing it compiles only those: the server's dependencies (echo, SQLite, the
// KurrentDB client, …) appear in the user's go.sum, but are never built or linked into the
// user's binary.
//
// # Commands are carried out once
//
// Every command (CreateOrder, AddLine, StartPayment, …) is one logical call. The client draws
// one ULID as its Idempotency-Key (or takes WithIdempotencyKey's) and sends every attempt of the
// call with that same key, so that the service carries the command out at most once and answers
// every retry with the first outcome (Meta.Replayed). ChangeLineQuantity and RemoveLine (PUT and
// DELETE, where the contract makes the key optional) carry one too, so that their retries are
// replays as well. An attempt is retried after a network error, a timeout (WithAttemptTimeout),
// a 429, a 5xx, or any answer with Retry-After (409 idempotency-key-in-flight, 409
// concurrent-modification): the answers the service does not keep for the key (Retryable);
// never after another 4xx, which is the command's answer for good. Between attempts the
// client waits a capped exponential back-off with full jitter (WithBackoff), at least the
// answer's Retry-After but never more than the back-off's ceiling (5 s by default), and gives up
// after WithMaxAttempts attempts or when the wait would pass the context's deadline, returning
// the last attempt's error: a 503's *Problem at once, rather than a wait past the deadline.
//
// # Answers
//
// Calls that answer an order return it with a Meta: how many attempts the call took, whether the
// answer was a replay, the order's ETag and the Log-Position of the command's effect. Every
// problem+json answer is returned as a *Problem, which errors.Is matches against the sentinel
// errors (ErrNotFound, ErrRejected, ErrKeyReused, …) by its code, or by its status for a code
// this client does not know.
//
// An answer that is not the service's is an error too, and final: a redirect, which the API
// never answers and the client never follows, with its own http.Client or a copy of the
// caller's (ErrRedirect), so that the API key, the body and the Idempotency-Key go to the base
// URL alone; and a success that is not application/json or not the resource the call promises,
// such as an order without an id (ErrMalformedAnswer). A command that ends with the latter may
// have been carried out: read the order, or send it again with
// WithIdempotencyKey(meta.IdempotencyKey) to have the service replay its answer.
//
// # Consistency
//
// WithIfMatch makes a command conditional on the order's version (412 otherwise). Reads answer
// from read models that follow the log; WithMinPosition(meta.LogPosition) makes a read wait for
// a command's effect, and Client.Session returns a client that does that by itself.
package client
