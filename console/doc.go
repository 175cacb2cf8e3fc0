// Package console serves the auditor's console at /console/: server-rendered pages of the
// orders, an order's timeline with its state at each event and its hash chain, idempotency
// keys, for auditors and admins the payment providers' events that were not applied, and for
// admins the projections and a verify of the whole log. It reads through the same code as the
// API (the read models, the order's stream and fold, package audit) and decides who may see
// what with the API's keys and access table (api.Server's Authenticate and Authorize). A
// browser signs in once with an API key and holds only a session cookie; sessions live in
// memory, bounded in count, and end with the process. A server in development mode (no keys)
// has no key to sign in with: there every request to a loopback name is the principal of
// development mode, as every API request is, without a session.
package console
