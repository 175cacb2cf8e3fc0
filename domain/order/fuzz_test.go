package order_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// FuzzDecide runs random command sequences, drawn as TestRandomCommands draws them, from the
// fuzzer's bytes: coverage guidance steers them towards paths that rapid's random draws rarely
// take. After every command: the refusal is well formed, every event survives a round trip,
// the order's invariants hold, an accepted step repeated is a no-op; at the end, folding the
// history again gives the same state. Seeds: byte streams long enough for any sequence the
// generators draw, so that none is refused as too short (a refusal is a skip, which CI fails).
func FuzzDecide(f *testing.F) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, seed))
		b := make([]byte, 64<<10)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(rapid.MakeFuzz(func(t *rapid.T) {
		var (
			s         order.State
			history   []order.Event
			confirmed int
			at        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		)
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			at = at.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, "seconds")) * time.Second)
			c := commandFor(s).Draw(t, "command")
			events, err := order.Decide(s, c, at)
			checkDecision(t, s, c, events, err)
			for _, e := range events {
				checkRoundTrip(t, e)
				s = order.Evolve(s, e)
				history = append(history, e)
				if _, ok := e.(order.PaymentConfirmed); ok {
					confirmed++
				}
			}
			checkInvariants(t, s, confirmed)
			if err == nil && len(events) > 0 && repeatable(c) {
				if again, err := order.Decide(s, c, at.Add(time.Minute)); err != nil || len(again) > 0 {
					t.Fatalf("repeating %#v decided %v, %v; want nothing", c, again, err)
				}
			}
		}
		if diff := cmp.Diff(fold(history), s); diff != "" {
			t.Fatalf("folding the history again gives another state (-refold +incremental):\n%s", diff)
		}
	}))
}
