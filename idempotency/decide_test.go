package idempotency

import (
	"fmt"
	"testing"
	"time"
)

// TestDecide is the key's whole life as a table: every phase × what this process holds × the
// request's fingerprint, one row per cell, and every cell asserted.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	claim := Claimed{Fingerprint: "fp", ExpiresAt: now.Add(time.Hour), LeaseUntil: now.Add(time.Second)}
	over := claim
	over.LeaseUntil = now.Add(-time.Second)
	old := claim
	old.ExpiresAt = now

	states := map[Phase]keyState{
		Unclaimed: {},
		Running:   {exists: true, first: claim, current: claim},
		Abandoned: {exists: true, first: claim, current: over},
		Finished:  {exists: true, first: claim, current: claim, done: &Completed{}},
		Expired:   {exists: true, first: old, current: old, done: &Completed{}},
	}
	released := keyState{exists: true, first: claim, current: claim, released: true}

	holdings := map[string]Holding{
		"none":     {},
		"here":     {Here: true},
		"pending":  {Here: true, Pending: true},
		"answered": {Here: true, Answered: true},
	}
	type cell struct {
		phase   Phase
		holding string
		same    bool // the request's fingerprint is the key's
	}
	want := map[cell]Step{}
	for _, h := range []string{"none", "here", "pending", "answered"} {
		for _, same := range []bool{true, false} {
			want[cell{Unclaimed, h, same}] = StepClaim
			want[cell{Expired, h, same}] = StepForget
			for _, p := range []Phase{Running, Abandoned, Finished} {
				switch {
				case h == "pending":
					want[cell{p, h, same}] = StepWait // the claim stands for nothing yet
				case !same:
					want[cell{p, h, same}] = StepRefuse
				case h == "answered" || p == Finished:
					want[cell{p, h, same}] = StepReplay
				case p == Abandoned:
					want[cell{p, h, same}] = StepTakeOver
				default:
					want[cell{p, h, same}] = StepWait
				}
			}
		}
	}
	if len(want) != len(states)*len(holdings)*2 {
		t.Fatalf("table has %d cells, want %d", len(want), len(states)*len(holdings)*2)
	}
	for c, step := range want {
		t.Run(fmt.Sprintf("%s/%s/same=%v", c.phase, c.holding, c.same), func(t *testing.T) {
			st := states[c.phase]
			if got := st.phase(now); got != c.phase {
				t.Fatalf("phase = %s, want %s", got, c.phase)
			}
			fp := "fp"
			if !c.same {
				fp = "other"
			}
			if got := decide(st, holdings[c.holding], fp, now); got != step {
				t.Errorf("decide = %s, want %s", got, step)
			}
		})
	}
	if got := released.phase(now); got != Abandoned {
		t.Errorf("a released key is %s, want %s", got, Abandoned)
	}
	if got := decide(released, Holding{}, "fp", now); got != StepTakeOver {
		t.Errorf("a released key: decide = %s, want %s", got, StepTakeOver)
	}
}
