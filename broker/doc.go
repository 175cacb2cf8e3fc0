// Package broker connects the service to NATS JetStream: commands in, events out. The intake
// consumes command messages through durable pull consumers, runs each as the REST request its
// subject names through the API's own handlers (a Dispatcher), and acknowledges it by its final
// answer: acked, redelivered later, or terminated and published to a dead-letter subject. The
// publisher follows the log from a checkpoint kept in the event store and publishes every order
// event with its id as Nats-Msg-Id, one node at a time under the service's lease. Neither holds
// a key protocol, a lease or an error kind of its own: the keyed pipeline, package lease and
// the API's problems are the ones HTTP uses.
package broker
