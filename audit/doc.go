// Package audit verifies the event log: every order stream's hash chain (see package command
// for its encoding), the order invariants along each fold, and the orders read model against
// the folds. It reads the global log once, in order, so it runs at the speed of the store.
package audit
