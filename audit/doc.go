// Package audit verifies the event log: every order stream's hash chain (see package command
// for its encoding), the order invariants along each fold, the orders read model against the
// folds, the payments and client-references lookups against the order events that make them,
// and the idempotency-keys lookup against the key streams. It reads the global log once, in
// order, so it runs at the speed of the store.
package audit
