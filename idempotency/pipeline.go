package idempotency

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
)

// Pipeline is the one way a keyed write runs, whatever brought it in (an HTTP request, a
// provider's event, an import). Do claims the key, or replays, waits or takes over as the key's
// phase says (see decide); plans the write (Work: an OrderCommand, a webhook endpoint's
// Registration); makes the plan's appends itself, with the key's claim in the same atomic
// append where the store can, with the key's outcome in the claim's own event; and otherwise
// records the outcome before it answers. An intake only reads its request, says what the write
// is and writes the answer.
type Pipeline struct {
	Keys   *Keys
	Orders *command.Handler
	// Hooks are for tests that crash the process at a precise point; zero in production.
	// Outcomes that could not be recorded are logged to Keys.Log.
	Hooks Hooks
}

// Hooks run at the points of a keyed command where a crash matters most.
type Hooks struct {
	AfterClaim  func(key string) // the key is claimed (maybe in this process only), the command has not run
	AfterAppend func(key string) // the command's events are appended, the outcome maybe not recorded
}

// Answer is what the intake sends back.
type Answer struct {
	Outcome  Outcome
	Replayed bool
	Err      error // the command's error, if this request ran it: for the intake's log
}

// ran is what a work run under a claim came to.
type ran struct {
	out Outcome
	err error
	// appended: the work appended events, this run or an earlier one (for Hooks.AfterAppend).
	appended bool
	// repeated: the work's effect was in its streams already; the answer is a replay.
	repeated bool
	plan     plan // to keep what it wrote once the key is kept
}

// releaseTimeout bounds, beyond the request's, the release of a key whose outcome could not be
// recorded.
const releaseTimeout = 5 * time.Second

// Do runs w once per key of r and returns the answer: the first run's, every time. Errors:
// ErrInFlight (ErrTakenOver among them: retry after a while), fault.KeyReused and the store's.
// ctx should outlive the client: a command runs to its end once claimed.
func (p *Pipeline) Do(ctx context.Context, r Request, w Work) (Answer, error) {
	// A key completed here is answered from memory before anything else is set up (Begin
	// looks there too, after a wait).
	if out, ok, err := p.Keys.replay(ctx, StreamName(r.Principal, r.Key), r.Fingerprint); ok {
		if err != nil {
			return Answer{}, err
		}
		return Answer{Outcome: *out, Replayed: true}, nil
	}
	// A new key's claim is written with the command's events, in one append, where the store
	// makes one append of several streams.
	_, r.Defer = p.Keys.Store.(eventstore.MultiStreamAppender)
	r.FindInOrderStream = func(ctx context.Context, subject string) (*Outcome, error) { return w.find(ctx, p, subject) }
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
		res, err := p.run(ctx, c, w)
		running = nil
		var ans Answer
		if err == nil {
			if res.appended {
				hook(p.Hooks.AfterAppend, r.Key)
			}
			ans, err = p.finish(ctx, r, c, res)
		}
		if !errors.Is(err, errStartOver) {
			return ans, err
		}
		// The key was not new after all, and nothing was written: see what it holds. Its
		// claim noted it as claimed (sweeper.claimed), so Begin reads the key rather than claim it again.
	}
}

// run plans w under claim c and makes the plan's appends, with the claim's own if it is still
// to be made, until the plan is done. It returns errStartOver, the claim let go, if the store
// refused the claim's append because the key exists after all: then nothing was written.
func (p *Pipeline) run(ctx context.Context, c *Claim, w Work) (ran, error) {
	pl := w.plan(ctx, p, c.OrderID, !c.Takeover)
	defer pl.Close()
	var recorded *Outcome // the outcome the claim's append records, if it does
	for appends := pl.Next(); appends != nil; appends = pl.Next() {
		key, unwritten := c.Append()
		if unwritten {
			if out, at, sure := pl.sure(); sure {
				// What was decided is what the store writes, or nothing.
				recorded = &out
				key, _ = c.AppendWithOutcome(out, at)
			}
			appends = append([]eventstore.StreamAppend{key}, appends...)
		}
		results, err := eventstore.Write(ctx, p.Keys.Store, appends...)
		if c.Refused(err) {
			p.Keys.Release(ctx, c, "")
			return ran{}, errStartOver
		}
		if err == nil && unwritten {
			c.Appended(ctx, results[0])
			results = results[1:]
		}
		pl.Written(ctx, results, err)
	}
	if !c.HasOutcome() {
		recorded = nil
	}
	res := pl.ran(recorded)
	res.plan = pl
	return res, nil
}

// errStartOver: the claim's append, left to the pipeline, was refused, because the key exists
// after all; nothing was written, and Do starts over with the key.
var errStartOver = errors.New("the key's claim was refused: start over")

// finish records the outcome of a run before its answer is given, or lets the key go.
func (p *Pipeline) finish(ctx context.Context, r Request, c *Claim, res ran) (Answer, error) {
	answer := Answer{Outcome: res.out, Replayed: res.repeated, Err: res.err}
	switch {
	case c.HasOutcome():
		// Recorded with the command's events (Claim.AppendWithOutcome): nothing is left to write.
		p.record(ctx, r, c, res)
		return answer, nil
	case !fault.Final(res.err):
		// An answer that depends on a passing condition of the server is not kept.
		if err := p.Keys.Release(ctx, c, http.StatusText(res.out.Status)); err != nil {
			p.log().WarnContext(ctx, "release key", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
		}
		return answer, nil
	}
	// An answer not recorded is not given.
	err := p.record(ctx, r, c, res)
	switch {
	case c.Refused(err):
		return Answer{}, errStartOver
	case errors.Is(err, ErrTakenOver):
		return Answer{}, err // another request runs the key now: its outcome stands
	case err != nil:
		// Let the key go, so that a retry runs at once rather than after the lease. If the
		// outcome did land, the release is refused and the retry gets it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		p.Keys.Release(ctx, c, "outcome not recorded")
		return Answer{}, err
	case c.Prior != nil:
		return Answer{Outcome: *c.Prior, Replayed: true}, nil // a retry recorded first
	}
	return answer, nil
}

// record records the outcome of a claimed command. Once it is kept by a claim no other request
// ran, the order after the command's events is remembered (command.Plan.Keep).
func (p *Pipeline) record(ctx context.Context, r Request, c *Claim, res ran) error {
	err := p.Keys.Complete(ctx, c, res.out)
	switch {
	case err == nil && c.Sole:
		res.plan.keep()
	case c.Refused(err):
		// Recorded nothing, and wrote nothing else: Do starts again.
	case errors.Is(err, ErrTakenOver):
		p.log().InfoContext(ctx, "record outcome", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
	case err != nil:
		// The effect, if any, is in the order's stream with its key: the next retry completes
		// the record from there.
		p.log().WarnContext(ctx, "record outcome", "claimant", r.Claimant, "key", KeyHash(r.Principal, r.Key), "error", err)
	}
	return err
}

func (p *Pipeline) log() *slog.Logger {
	if p.Keys.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Keys.Log
}

func hook(f func(string), key string) {
	if f != nil {
		f(key)
	}
}
