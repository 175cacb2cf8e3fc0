package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Pipeline is the one way a keyed command runs, whatever brought it in (an HTTP request, a
// queue, an import): Do claims its key, or replays, waits or takes over as the key's phase
// says (see decide), runs the command once under the claim, and records its outcome before or
// after the answer. An intake only reads its request, builds the command and writes the answer.
type Pipeline struct {
	Keys *Keys
	// Hooks are for tests that crash the process at a precise point; zero in production.
	Hooks Hooks
	// Log hears outcomes that could not be recorded; nil discards them.
	Log *slog.Logger

	recording sync.WaitGroup // outcomes recorded after their answers (see Drain)
}

// Hooks run at the points of a keyed command where a crash matters most.
type Hooks struct {
	AfterClaim  func(key string) // the key is claimed (maybe in this process only), the command has not run
	AfterAppend func(key string) // the command's events are appended, the outcome is not recorded
	AfterAnswer func(key string) // the answer is given, the outcome is not recorded
}

// Run runs the command once under claim c. Do calls it again, with a new claim, only when the
// first claim's own append was refused (Claim.Refused): then nothing was written.
type Run func(ctx context.Context, c *Claim) Result

// Result is what a command run under a claim came to.
type Result struct {
	Outcome Outcome // the answer as sent, stored and replayed
	Err     error   // the command's error, if any
	// Keep stores the outcome for replay: an answer whose error is final (fault.Final), not
	// one that depends on a passing condition of the server. Any other answer lets the key go.
	Keep bool
	// Appended: the command appended events, this run or an earlier one (for Hooks.AfterAppend).
	Appended bool
	// Written: the answer is in the order's stream with the key's events, which this run
	// wrote. It may then be given before it is recorded: a retry rebuilds this very answer
	// from there (Request.FindInOrderStream) should the record never land.
	Written bool
	// Repeated: the key's events were in the order's stream already; the answer is a replay.
	Repeated bool
}

// Answer is what the intake sends back.
type Answer struct {
	Outcome  Outcome
	Replayed bool
}

// Timeouts of the pipeline's own work, beyond the request's.
const (
	recordTimeout  = 30 * time.Second // recording an outcome after its answer
	releaseTimeout = 5 * time.Second  // releasing a key whose outcome could not be recorded
)

// Do runs the command of r once per key and returns the answer: the first run's, every time.
// Errors: ErrInFlight (ErrTakenOver among them: retry after a while), fault.KeyReused and the
// store's. ctx should outlive the client: a command runs to its end once claimed.
func (p *Pipeline) Do(ctx context.Context, r Request, run Run) (Answer, error) {
	r.Defer = true // a new key's claim is written with the command's events, in one append
	var running *Claim
	defer func() {
		if running != nil {
			// A panic between the claim and its outcome: give the key up so that a retry runs
			// at once; the order's stream tells it whether the command took effect.
			p.Keys.Release(context.WithoutCancel(ctx), running, "panic")
		}
	}()
	for {
		c, replay, err := p.Keys.Begin(ctx, r)
		switch {
		case err != nil:
			return Answer{}, err
		case replay != nil:
			return Answer{Outcome: *replay, Replayed: true}, nil
		}
		running = c
		hook(p.Hooks.AfterClaim, r.Key)
		res := run(ctx, c)
		running = nil
		if c.Refused(res.Err) {
			// The key was not new after all, and nothing was written: see what it holds.
			p.Keys.Release(ctx, c, "")
			r.Defer = false
			continue
		}
		if res.Appended {
			hook(p.Hooks.AfterAppend, r.Key)
		}
		ans, again, err := p.finish(ctx, r, c, res)
		if again {
			r.Defer = false
			continue
		}
		return ans, err
	}
}

// finish records the outcome of a run, before or after its answer, or lets the key go. again
// asks Do to start over: the claim, written only with the outcome, was refused.
func (p *Pipeline) finish(ctx context.Context, r Request, c *Claim, res Result) (ans Answer, again bool, err error) {
	answer := Answer{Outcome: res.Outcome, Replayed: res.Repeated}
	if c.Recorded() {
		// Recorded with the command's events (Claim.PendingWith): nothing is left to write.
		p.record(ctx, r, c, res)
		return answer, false, nil
	}
	switch {
	case !res.Keep:
		if err := p.Keys.Release(ctx, c, http.StatusText(res.Outcome.Status)); err != nil {
			p.log().Warn("release key", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
		}
		return answer, false, nil
	case res.Err == nil && res.Written:
		// Answer now, record after: duplicates here get this answer at once (Answered).
		p.Keys.Answered(c, res.Outcome)
		p.recordLater(ctx, r, c, res)
		return answer, false, nil
	}
	// Nothing in the order's stream would tell this answer word for word, or the events there
	// may be another run's: record it before giving it. An answer not recorded is not given.
	_, pending := c.Pending()
	err = p.record(ctx, r, c, res)
	switch {
	case pending && err != nil:
		return Answer{}, true, nil
	case errors.Is(err, ErrTakenOver):
		return Answer{}, false, err // another request runs the key now: its outcome stands
	case err != nil:
		// Let the key go, so that a retry runs at once rather than after the lease. If the
		// outcome did land, the release is refused and the retry gets it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		p.Keys.Release(ctx, c, "outcome not recorded")
		return Answer{}, false, err
	case c.Prior != nil:
		return Answer{Outcome: *c.Prior, Replayed: true}, false, nil // a retry recorded first
	}
	return answer, false, nil
}

// recordLater records an outcome already answered, in the background; Drain waits for it.
func (p *Pipeline) recordLater(ctx context.Context, r Request, c *Claim, res Result) {
	p.recording.Add(1)
	go func() {
		defer p.recording.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		hook(p.Hooks.AfterAnswer, r.Key)
		p.record(ctx, r, c, res)
	}()
}

// record records the outcome of a claimed command.
func (p *Pipeline) record(ctx context.Context, r Request, c *Claim, res Result) error {
	err := p.Keys.Complete(ctx, c, res.Outcome)
	switch {
	case c.Refused(err):
		// Recorded nothing, and wrote nothing else: Do starts again.
	case errors.Is(err, ErrTakenOver):
		p.log().Info("record outcome", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
	case err != nil:
		// The effect, if any, is in the order's stream with its key: the next retry completes
		// the record from there.
		p.log().Warn("record outcome", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
	}
	return err
}

// Drain waits until the outcomes answered before they were recorded are recorded, or ctx
// ends. Call it once no more commands come in, before the store closes.
func (p *Pipeline) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		p.recording.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outcomes still being recorded: %w", ctx.Err())
	}
}

func (p *Pipeline) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func hook(f func(string), key string) {
	if f != nil {
		f(key)
	}
}
