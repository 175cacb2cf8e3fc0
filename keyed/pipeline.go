package keyed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/idempotency"
)

// Pipeline is the one way a keyed write runs, whatever brought it in (an HTTP request, a
// provider's event). An intake reads its request, says what the write is (Work) and writes
// the answer.
type Pipeline struct {
	Keys   *idempotency.Keys
	Orders *command.Handler
	// Hooks are for tests that crash the process at a precise point; zero in production.
	Hooks Hooks
}

// Hooks run at the points of a keyed command where a crash matters most.
type Hooks struct {
	AfterClaim  func(key string) // the key is held (written first, on a claim-first store); the command has not run
	AfterAppend func(key string) // the command's events are appended, with the key's record where the store can
}

// Answer is what the intake sends back.
type Answer struct {
	Outcome  idempotency.Outcome
	Replayed bool
	Err      error // the work's error, if this request ran it: for the intake's log
}

// Prepare reads a request's work, once the request is not the retry of one completed here with
// these very bytes: it sets the request's fingerprint (and its subject, if it looks it up), or
// returns the intake's error, which Do returns.
type Prepare func(r *idempotency.Request) (Work, error)

// Ready is the Prepare of a work already read, with its request's fingerprint set.
func Ready(w Work) Prepare { return func(*idempotency.Request) (Work, error) { return w, nil } }

// Do runs the work of r once per key and returns the answer: the first run's, every time. A
// retry of a key completed here is answered from memory, by the digest of its bytes before its
// work is read (decoding and fingerprinting a small create is a fifth of a replay's processor
// time), or by its fingerprint. Errors: prepare's, idempotency.ErrInFlight (ErrTakenOver among
// them: retry after a while), fault.KeyReused and the store's. ctx should outlive the client: a
// write runs to its end once the key is held.
func (p *Pipeline) Do(ctx context.Context, r idempotency.Request, prepare Prepare) (Answer, error) {
	if out, ok := p.Keys.RecallBytes(ctx, r.Principal, r.Key, r.Digest); ok {
		return Answer{Outcome: *out, Replayed: true}, nil
	}
	w, err := prepare(&r)
	if err != nil {
		return Answer{}, err
	}
	if out, ok, err := p.Keys.Replay(ctx, r); ok {
		if err != nil {
			return Answer{}, err
		}
		return Answer{Outcome: *out, Replayed: true}, nil
	}
	write := p.writeClaimFirst
	if _, ok := p.Keys.Store.(eventstore.MultiStreamAppender); ok {
		write = p.writeAtomic
	}
	for {
		c, replay, err := p.Keys.Begin(ctx, r)
		switch {
		case err != nil:
			return Answer{}, err
		case replay != nil:
			return Answer{Outcome: *replay, Replayed: true}, nil
		}
		ans, err := write(ctx, c, r, w)
		if !errors.Is(err, errStartOver) {
			return ans, err
		}
		// The key was claimed meanwhile, or existed after all, and nothing was written: see
		// what its stream holds.
		r.ReadFirst = true
	}
}

// errStartOver: the store refused the key's claim, because another request claimed the key
// meanwhile or it existed after all; nothing was written.
var errStartOver = errors.New("the key's claim was refused: start over")

func (p *Pipeline) log(r idempotency.Request) *slog.Logger {
	return cmp.Or(p.Keys.Log, slog.New(slog.DiscardHandler)).With("claimant", r.Claimant, "key", idempotency.KeyHash(r.Principal, r.Key))
}

func hook(f func(string), key string) {
	if f != nil {
		f(key)
	}
}
