package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
)

// makeClaim writes the claim that Begin left to the run (Request.Defer), on its own.
func makeClaim(ctx context.Context, s eventstore.Store, c *idempotency.Claim) error {
	a, ok := c.Pending()
	if !ok {
		return nil
	}
	res, err := s.Append(ctx, a.Stream, a.Expected, a.Events...)
	if err == nil {
		c.Made(ctx, res)
	}
	return err
}

func TestPipelineRunsOnceAndReplaysTheFirstAnswer(t *testing.T) {
	keys, _, s := newKeys(t)
	p := &idempotency.Pipeline{Keys: keys}
	ctx := context.Background()
	runs := 0
	run := func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		runs++
		return idempotency.Result{Outcome: created, Keep: true, Err: makeClaim(ctx, s, c)}
	}
	for i := range 3 {
		ans, err := p.Do(ctx, request("fp"), run)
		if err != nil || ans.Outcome.Body != created.Body || ans.Replayed != (i > 0) {
			t.Fatalf("Do %d: %+v, %v", i, ans, err)
		}
	}
	if runs != 1 {
		t.Errorf("the command ran %d times, want 1", runs)
	}
	if _, err := p.Do(ctx, request("other"), run); !errors.Is(err, fault.KeyReused) {
		t.Errorf("another request with the key: %v, want ErrKeyReused", err)
	}
}

// A key this process does not know is claimed along with the command; when the store refuses
// that claim because another process completed the key, the run wrote nothing and the first
// answer is replayed.
func TestPipelineReplaysWhenTheClaimIsRefused(t *testing.T) {
	first, clk, s := newKeys(t)
	ctx := context.Background()
	done := func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		return idempotency.Result{Outcome: created, Keep: true, Err: makeClaim(ctx, s, c)}
	}
	if _, err := (&idempotency.Pipeline{Keys: first}).Do(ctx, request("fp"), done); err != nil {
		t.Fatal(err)
	}
	other := &idempotency.Keys{Store: s, TTL: first.TTL, Lease: first.Lease, Wait: first.Wait, Now: clk.Now}
	runs := 0
	ans, err := (&idempotency.Pipeline{Keys: other}).Do(ctx, request("fp"), func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		runs++
		return idempotency.Result{Outcome: idempotency.Outcome{Status: 200, Body: "second\n"}, Keep: true, Err: makeClaim(ctx, s, c)}
	})
	if err != nil || !ans.Replayed || ans.Outcome.Body != created.Body {
		t.Fatalf("Do on the other process: %+v, %v; want the first answer replayed", ans, err)
	}
	if runs != 1 {
		t.Errorf("the run was called %d times, want 1 (refused, then replayed)", runs)
	}
}

// An answer not kept (a 5xx) lets the key go: the next request with it runs the command.
func TestPipelineLetsTheKeyGoOfAnAnswerNotKept(t *testing.T) {
	keys, _, s := newKeys(t)
	p := &idempotency.Pipeline{Keys: keys}
	ctx := context.Background()
	runs := 0
	run := func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		runs++
		if runs == 1 {
			return idempotency.Result{Outcome: idempotency.Outcome{Status: 503}, Err: makeClaim(ctx, s, c)}
		}
		return idempotency.Result{Outcome: created, Keep: true, Err: makeClaim(ctx, s, c)}
	}
	if ans, err := p.Do(ctx, request("fp"), run); err != nil || ans.Outcome.Status != 503 {
		t.Fatalf("first Do: %+v, %v", ans, err)
	}
	if ans, err := p.Do(ctx, request("fp"), run); err != nil || ans.Replayed || ans.Outcome.Status != 201 {
		t.Fatalf("second Do: %+v, %v; want the command run again", ans, err)
	}
}

// An answer the order's stream holds is given before its outcome is recorded; Drain waits for
// the record, which another process then replays.
func TestPipelineRecordsAfterAnAnswerItWrote(t *testing.T) {
	keys, clk, s := newKeys(t)
	answered := make(chan struct{})
	p := &idempotency.Pipeline{Keys: keys, Hooks: idempotency.Hooks{AfterAnswer: func(string) { <-answered }}}
	ctx := context.Background()
	settled := false
	ans, err := p.Do(ctx, request("fp"), func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		c.OnKept(func() { settled = true })
		return idempotency.Result{Outcome: created, Keep: true, Written: true, Err: makeClaim(ctx, s, c)}
	})
	if err != nil || ans.Replayed || ans.Outcome.Body != created.Body {
		t.Fatalf("Do: %+v, %v", ans, err)
	}
	close(answered)
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !settled {
		t.Error("the claim did not tell it was kept once its outcome was recorded")
	}
	other := &idempotency.Keys{Store: s, TTL: keys.TTL, Lease: keys.Lease, Wait: keys.Wait, Now: clk.Now}
	_, replay, err := other.Begin(ctx, request("fp"))
	if err != nil || replay == nil || replay.Body != created.Body {
		t.Fatalf("another process after Drain: %+v, %v; want the recorded outcome", replay, err)
	}
}

// A run that panics gives its key up: the next request with it runs the command at once.
func TestPipelineReleasesTheKeyOfARunThatPanics(t *testing.T) {
	keys, _, s := newKeys(t)
	p := &idempotency.Pipeline{Keys: keys}
	ctx := context.Background()
	func() {
		defer func() { _ = recover() }()
		p.Do(ctx, request("fp"), func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
			if err := makeClaim(ctx, s, c); err != nil {
				t.Error(err)
			}
			panic("the command failed")
		})
	}()
	ans, err := p.Do(ctx, request("fp"), func(ctx context.Context, c *idempotency.Claim) idempotency.Result {
		return idempotency.Result{Outcome: created, Keep: true, Err: makeClaim(ctx, s, c)}
	})
	if err != nil || ans.Replayed || ans.Outcome.Status != 201 {
		t.Fatalf("Do after a panic: %+v, %v; want the command run at once", ans, err)
	}
}
