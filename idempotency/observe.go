package idempotency

import (
	"context"
	"log/slog"
	"strings"

	"github.com/acme/orders/internal/requestlog"
	"github.com/prometheus/client_golang/prometheus"
)

// Event is a step in the life of a key, as Keys logs and counts it.
type Event string

// The steps of a key's life. A request hears claimed, replayed, mismatched or taken-over from
// Begin, possibly after waited (a duplicate waiting for the holder), or in-flight when the
// wait ran out, or expired before its claim of a key past its TTL; the holder then hears
// completed or released. A claim is heard as claimed (or taken-over) once the store took it,
// with the command's events and its outcome (Keys.Kept) or on its own (Keys.WriteClaim); never
// if the store refused it.
const (
	EventClaimed    Event = "claimed"    // a new request holds the key
	EventReplayed   Event = "replayed"   // a retry gets the stored outcome
	EventMismatched Event = "mismatched" // the key was used for another request (fault.KeyReused)
	EventWaited     Event = "waited"     // a duplicate waits for the request that holds the key
	EventInFlight   Event = "in-flight"  // ... and gave up (ErrInFlight)
	EventTakenOver  Event = "taken-over" // a claim abandoned or released was taken over
	EventCompleted  Event = "completed"  // the holder recorded its outcome
	EventReleased   Event = "released"   // the holder gave the key up without one (a 5xx)
	EventExpired    Event = "expired"    // a request found the key past its TTL, and claims it anew
)

// Events lists every Event, for metrics that want each to show up from the start.
var Events = []Event{EventClaimed, EventReplayed, EventMismatched, EventWaited, EventInFlight,
	EventTakenOver, EventCompleted, EventReleased, EventExpired}

// Steps counts the steps of keys' lives by Event: orders_idempotency_keys_total.
type Steps struct {
	counter *prometheus.CounterVec
}

// NewSteps makes the counter, every step at 0 from the start, and registers it with reg.
func NewSteps(reg prometheus.Registerer) *Steps {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orders_idempotency_keys_total",
		Help: "Steps in the lives of idempotency keys: claimed (a new request), replayed, mismatched (fingerprint), waited (in flight), in-flight (409), taken-over, completed, released, expired.",
	}, []string{"event"})
	for _, e := range Events {
		c.WithLabelValues(string(e))
	}
	reg.MustRegister(c)
	return &Steps{c}
}

// observe counts step e of the key stream's life and logs it, with the key's hash (KeyHash): on
// the line of the request ctx is of (requestlog.Request.Step), which its intake logs once it
// has answered, or, outside a request, on a line of its own.
func (k *Keys) observe(ctx context.Context, e Event, stream string) {
	if k.Steps != nil {
		k.Steps.counter.WithLabelValues(string(e)).Inc()
	}
	hash := strings.TrimPrefix(stream, StreamPrefix)
	hash = hash[:min(len(hash), 16)]
	if r := requestlog.FromContext(ctx); r != nil {
		r.Step(hash, string(e))
	} else if k.Log != nil {
		k.Log.LogAttrs(ctx, slog.LevelInfo, "idempotency key", slog.String("event", string(e)), slog.String("key_hash", hash))
	}
}
