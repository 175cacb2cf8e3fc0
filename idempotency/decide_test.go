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
	claim := Claimed{Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	old := claim
	old.ExpiresAt = now

	states := map[Phase]keyState{
		Unclaimed: {},
		Running:   {exists: true, first: claim, current: claim},
		Abandoned: {exists: true, first: claim, current: claim}, // its lease seen over (Holding.LeaseOver)
		Finished:  {exists: true, first: claim, current: claim, done: &Completed{}},
		Expired:   {exists: true, first: old, current: old, done: &Completed{}},
	}
	released := keyState{exists: true, first: claim, current: claim, released: true}

	holdings := map[string]Holding{
		"none": {},
		"here": {Here: true},
	}
	// The protocol, one row per phase × holding × fingerprint (same: the request's fingerprint
	// is the key's). A claim held here is written by its holder, which tells what the key
	// holds: its duplicates here wait, whatever their fingerprints.
	type cell struct {
		phase   Phase
		holding string
		same    bool
	}
	rows := []struct {
		phase   Phase
		holding string
		same    bool
		step    Step
	}{
		{Unclaimed, "none", true, StepClaim},
		{Unclaimed, "none", false, StepClaim},
		{Unclaimed, "here", true, StepWait},
		{Unclaimed, "here", false, StepWait},
		{Running, "none", true, StepWait},
		{Running, "none", false, StepRefuse},
		{Running, "here", true, StepWait},
		{Running, "here", false, StepWait},
		{Abandoned, "none", true, StepTakeOver},
		{Abandoned, "none", false, StepRefuse},
		{Abandoned, "here", true, StepWait},
		{Abandoned, "here", false, StepWait},
		{Finished, "none", true, StepReplay},
		{Finished, "none", false, StepRefuse},
		{Finished, "here", true, StepWait},
		{Finished, "here", false, StepWait},
		{Expired, "none", true, StepClaimExpired},
		{Expired, "none", false, StepClaimExpired},
		{Expired, "here", true, StepWait},
		{Expired, "here", false, StepWait},
	}
	want := map[cell]Step{}
	for _, r := range rows {
		want[cell{r.phase, r.holding, r.same}] = r.step
	}
	if len(rows) != len(states)*len(holdings)*2 || len(want) != len(rows) {
		t.Fatalf("table has %d rows (%d distinct), want %d", len(rows), len(want), len(states)*len(holdings)*2)
	}
	for c, step := range want {
		t.Run(fmt.Sprintf("%s/%s/same=%v", c.phase, c.holding, c.same), func(t *testing.T) {
			st, h := states[c.phase], holdings[c.holding]
			h.LeaseOver = c.phase == Abandoned
			if got := st.phase(now, h.LeaseOver); got != c.phase {
				t.Fatalf("phase = %s, want %s", got, c.phase)
			}
			fp := "fp"
			if !c.same {
				fp = "other"
			}
			if got := decide(st, h, fp, now); got != step {
				t.Errorf("decide = %s, want %s", got, step)
			}
		})
	}
	if got := released.phase(now, false); got != Abandoned {
		t.Errorf("a released key is %s, want %s", got, Abandoned)
	}
	if got := decide(released, Holding{}, "fp", now); got != StepTakeOver {
		t.Errorf("a released key: decide = %s, want %s", got, StepTakeOver)
	}
}
