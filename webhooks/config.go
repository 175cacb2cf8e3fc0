package webhooks

import (
	"fmt"
	"strings"
	"time"
)

// Config bounds and paces deliveries. DefaultConfig gives the values of the contract.
type Config struct {
	// Schedule is the delay before each attempt: the first (normally 0), then each retry.
	// After the last attempt fails the delivery is dead-lettered.
	Schedule []time.Duration
	// Timeout bounds an attempt: a 2xx must come within it.
	Timeout time.Duration
	// Lease is how long a checkpoint reserves an endpoint's deliveries for its node: another
	// node takes over once it has seen no new checkpoint for this long, by its own clock. A
	// node starts an attempt only while its lease outlasts the attempt's timeout.
	Lease time.Duration
	// SingleNode: the store has one server (the embedded store, whose data directory is
	// locked), so a lease left by a process that died is taken over at once.
	SingleNode bool
	// DisableAfter disables an endpoint that has failed without a success for this long.
	DisableAfter time.Duration
	// MaxEndpoints bounds the endpoints of one principal.
	MaxEndpoints int
	// MaxInFlight bounds the attempts running at once for one endpoint.
	MaxInFlight int
	// MaxAttempts bounds the attempts running at once on this node, whatever their endpoints:
	// each holds at most one outgoing connection, and at most as many more are kept idle for
	// reuse, so deliveries hold at most twice MaxAttempts descriptors.
	MaxAttempts int
	// MaxPending bounds the deliveries an endpoint's checkpoint holds (waiting, in flight or
	// waiting for a retry); the endpoint reads no further in the log until one leaves.
	MaxPending int
	// TailBuffer bounds the deliveries the node's shared reader of the log holds for one runner
	// until it takes them; a runner whose buffer is full reads the log on its own until it
	// catches up again. 0: every runner reads the log on its own.
	TailBuffer int
	// MaxDeadLetters bounds the events of an endpoint's dead-letter stream (dead letters and
	// retries asked for by hand): past it the stream is truncated to its latest events, three
	// quarters of MaxDeadLetters, and the older dead letters are dropped.
	MaxDeadLetters int
	// MaxAttemptRecords bounds the attempts kept per delivery (the latest).
	MaxAttemptRecords int
	// MaxResponseBytes bounds what is read of a receiver's answer.
	MaxResponseBytes int64
	// KeyTTL is how long a registration's or a rotation's Idempotency-Key answers its retries
	// with the secret it drew (the server's key TTL); 0: as long as the secret is current.
	KeyTTL time.Duration
	// AllowPrivate allows plain http and loopback, private and link-local addresses.
	AllowPrivate bool
}

// DefaultConfig is the contract's configuration.
func DefaultConfig() Config {
	return Config{
		Schedule: []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
			5 * time.Hour, 10 * time.Hour, 10 * time.Hour},
		Timeout:           10 * time.Second,
		Lease:             30 * time.Second,
		DisableAfter:      5 * 24 * time.Hour,
		MaxEndpoints:      1000,
		MaxInFlight:       16,
		MaxAttempts:       256,
		MaxPending:        1000,
		TailBuffer:        1000,
		MaxDeadLetters:    10000,
		MaxAttemptRecords: 20,
		MaxResponseBytes:  64 << 10,
	}
}

// ParseSchedule reads a retry schedule such as "0s,5s,5m,30m".
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("retry schedule %q: %q is not a duration of 0 or more", s, f)
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 100 {
		return nil, fmt.Errorf("retry schedule %q: want 1 to 100 delays", s)
	}
	return out, nil
}

// Check reports a configuration that cannot work.
func (c Config) Check() error {
	switch {
	case len(c.Schedule) == 0:
		return fmt.Errorf("webhooks: empty retry schedule")
	case c.Timeout <= 0 || c.Lease < 3*c.Timeout:
		return fmt.Errorf("webhooks: the lease (%v) must be at least three attempt timeouts (%v)", c.Lease, c.Timeout)
	case c.MaxEndpoints < 1 || c.MaxInFlight < 1 || c.MaxAttempts < 1 || c.MaxPending < c.MaxInFlight || c.MaxDeadLetters < 1 || c.MaxAttemptRecords < 1 || c.MaxResponseBytes < 0 || c.TailBuffer < 0:
		return fmt.Errorf("webhooks: bounds must be positive, and pending at least in flight")
	}
	return nil
}
