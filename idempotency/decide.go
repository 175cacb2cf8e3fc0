package idempotency

import "time"

// Phase is where a key stands in its life, as its recorded events tell.
type Phase string

// The phases of a key. A key moves Unclaimed → Finished when its record is written with the
// outcome (or Unclaimed → Running → Finished on a store that writes the claim first), from
// Running to Abandoned when its holder dies or lets it go, and back to Running when a request
// takes it over. Once its first claim is older than the TTL it is Expired: the store stops
// returning a key stream past its maximum age (the TTL, set by the key's append), so a key
// reads as Expired only if it was written before the store kept its age.
const (
	Unclaimed Phase = "unclaimed" // no claim recorded: the key is new
	Running   Phase = "running"   // claimed, its lease not over: a request is running the command
	Abandoned Phase = "abandoned" // claimed, but released (a 5xx) or its lease is over
	Finished  Phase = "finished"  // its outcome is recorded
	Expired   Phase = "expired"   // past its TTL: it is new again
)

// Step is what a request does next with its key.
type Step string

// The steps a request may take.
const (
	StepClaim        Step = "claim"         // claim the new key, then run the command
	StepClaimExpired Step = "claim-expired" // claim the expired key at its stream's revision, as new
	StepReplay       Step = "replay"        // answer with the outcome recorded
	StepWait         Step = "wait"          // another request runs the command: wait for its outcome
	StepTakeOver     Step = "take-over"     // claim the key from a request that died or let go
	StepRefuse       Step = "refuse"        // the key was used for another request: fault.KeyReused
)

// Holding is what this process knows of a key's claim beyond the key's stream.
type Holding struct {
	Here      bool // a request of this process holds the key: its write tells what the key holds
	LeaseOver bool // another's claim is past its lease, as this process has seen it (lease.Terms.Over)
}

// phase returns the key's phase at now, given whether its claim's lease is over.
func (s keyState) phase(now time.Time, leaseOver bool) Phase {
	switch {
	case !s.exists:
		return Unclaimed
	case !s.first.ExpiresAt.After(now):
		return Expired
	case s.done != nil:
		return Finished
	case s.released || leaseOver:
		return Abandoned
	}
	return Running
}

// decide is the key's life as a pure function: the next step of a request with fingerprint
// at now, given the key's stream folded (s) and what this process holds of it (h).
func decide(s keyState, h Holding, fingerprint string, now time.Time) Step {
	if h.Here {
		// Whatever the fingerprints: the holder's write tells what the key holds, and its
		// outcome is then answered from memory.
		return StepWait
	}
	phase := s.phase(now, h.LeaseOver)
	switch phase {
	case Unclaimed:
		return StepClaim
	case Expired:
		return StepClaimExpired
	case Finished, Abandoned, Running:
		if s.first.Fingerprint != fingerprint {
			return StepRefuse
		}
	}
	switch phase {
	case Finished:
		return StepReplay
	case Abandoned:
		return StepTakeOver
	}
	return StepWait
}
