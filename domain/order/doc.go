// Package order is the order aggregate: commands, events, Decide and Evolve. It is pure: no I/O,
// no clock, no id generation.
package order
