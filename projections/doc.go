// Package projections follows the global log from a checkpoint and keeps read models and key
// lookups current.
package projections
