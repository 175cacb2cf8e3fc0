// Package eventstore defines the event store contract shared by every backend, modelled on
// KurrentDB's semantics, and the conformance suite every backend must pass.
package eventstore
