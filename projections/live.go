package projections

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// loop follows the log and, when asked, rebuilds, until ctx ends or a handler fails.
func (rn *run) loop(ctx context.Context, f *feed) {
	events, followErr := f.events, f.failed

	batch := make([]eventstore.RecordedEvent, 0, 10*rn.r.batchSize())
	for {
		batch = batch[:0]
		rn.mu.Lock()
		rebuilding := rn.rebuild != nil
		rn.mu.Unlock()
		if rebuilding && !rn.stepRebuild(ctx, events, &batch) {
			rn.setState(StateStopped, nil)
			return
		}
		if len(batch) == 0 && !rebuilding {
			select {
			case e := <-events:
				batch = append(batch, e)
			case <-rn.rebuildReq:
				if err := rn.startRequested(ctx); err != nil {
					rn.fail(ctx, err)
					return
				}
				continue
			case err := <-followErr:
				rn.fail(ctx, fmt.Errorf("follow the log: %w", err))
				return
			case <-ctx.Done():
				rn.setState(StateStopped, nil)
				return
			}
		}
		if !rebuilding {
			// Not during a rebuild: its next step waits for this batch.
			batch = rn.linger(ctx, events, batch)
		}
	drain:
		for len(batch) > 0 && len(batch) < cap(batch) {
			select {
			case e := <-events:
				batch = append(batch, e)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := rn.retry(ctx, func() error { return rn.applyLive(ctx, batch, len(events) == 0) }); err != nil {
			rn.setState(StateStopped, nil)
			return
		}
	}
}

// stepRebuild runs a step of the rebuild between live batches, so that the live model keeps
// up meanwhile, and gathers the next live batch unless the rebuild is done. It is false once
// ctx ends.
func (rn *run) stepRebuild(ctx context.Context, events <-chan eventstore.RecordedEvent, batch *[]eventstore.RecordedEvent) bool {
	var done bool
	err := rn.retry(ctx, func() (err error) {
		done, err = rn.rebuildStep(ctx)
		if err != nil {
			err = fmt.Errorf("rebuild: %w", err)
		}
		return err
	})
	return err == nil && (done || rn.waitLive(ctx, events, batch))
}

// linger gathers events into batch, which holds the first of a live batch, until it holds
// BatchSize events or the Runner's Linger has passed, so that one transaction applies them all.
// It does not wait when a full batch is already waiting (catching up), and never keeps a reader
// waiting: it does not start while a WaitFor waits on the projection and stops when one starts
// to. When ctx ends it returns what it has, which is applied like any batch (a batch's
// statements do not watch ctx: see statementContext); the loop stops after it.
func (rn *run) linger(ctx context.Context, events <-chan eventstore.RecordedEvent, batch []eventstore.RecordedEvent) []eventstore.RecordedEvent {
	d, full := rn.r.lingerTime(), rn.r.batchSize()
	rn.mu.Lock()
	waited, hurry := rn.waiters > 0, rn.hurry
	rn.mu.Unlock()
	if d < 0 || waited || len(batch)+len(events) >= full {
		return batch
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(batch) < full {
		select {
		case e := <-events:
			batch = append(batch, e)
		case <-hurry:
			return batch
		case <-timer.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// applyLive applies batch to the live generation with its checkpoint, skipping events at or
// before the checkpoint (a rebuild that took over may already have applied them).
func (rn *run) applyLive(ctx context.Context, batch []eventstore.RecordedEvent, caughtUp bool) error {
	rn.mu.Lock()
	gen, cp, outdated := rn.generation, rn.checkpoint, rn.outdated
	rn.mu.Unlock()
	last := batch[len(batch)-1]
	if last.Position.Compare(cp) <= 0 {
		return nil
	}
	filter, applies := rn.p.Filter(), rn.applies
	fresh := rn.fresh[:0]
	for _, e := range batch {
		if e.Position.Compare(cp) > 0 && filter.Match(e.Stream) && applies(e.Type) {
			fresh = append(fresh, e)
		}
	}
	rn.fresh = fresh
	ctx = statementContext(ctx)
	if len(fresh) == 0 || outdated {
		return rn.skip(ctx, last, len(batch), caughtUp, outdated)
	}
	defer clear(fresh) // let the events' bytes go with the batch
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := rn.p.Apply(ctx, tx, tablesOf(rn.p, gen), fresh); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET commit_position = ?, prepare_position = ? WHERE name = ?`,
			last.Position.Commit, last.Position.Prepare, rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("apply events %v..%v: %w", fresh[0].Position, fresh[len(fresh)-1].Position, err)
	}
	rn.unsaved = 0
	rn.advance(last, caughtUp)
	return nil
}

// unsavedEvents bounds the events a projection passes without storing its checkpoint, when
// none of them is its to apply: ten BatchSizes (10,000 by default), the most a batch holds
// while catching up. A restart reads at most that many again.
func (r *Runner) unsavedEvents() int { return 10 * r.batchSize() }

// skip moves the checkpoint past a batch of n events with nothing to apply, without a write,
// except that once unsavedEvents have passed so it stores the checkpoint alone. Nothing is
// written for an outdated generation, which Apply cannot write (its rebuild reads these events
// from the log).
func (rn *run) skip(ctx context.Context, last eventstore.RecordedEvent, n int, caughtUp, outdated bool) error {
	if rn.unsaved += n; rn.unsaved >= rn.r.unsavedEvents() && !outdated {
		err := rn.tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET commit_position = ?, prepare_position = ? WHERE name = ?`,
				last.Position.Commit, last.Position.Prepare, rn.p.Name())
			return err
		})
		if err != nil {
			return fmt.Errorf("store checkpoint %v: %w", last.Position, err)
		}
		rn.unsaved = 0
	}
	rn.advance(last, caughtUp)
	return nil
}

func (rn *run) advance(last eventstore.RecordedEvent, caughtUp bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.checkpoint, rn.lastAt = last.Position, last.Recorded
	if rn.state == StateCatchingUp || rn.state == StateLive {
		rn.state = StateCatchingUp
		if caughtUp {
			rn.state = StateLive
		}
	}
	close(rn.advanced)
	rn.advanced = make(chan struct{})
}

// retry runs step until it succeeds or ctx ends. While it fails the projection is failed, with
// the error in its status, and applies nothing: it never skips an event. A failure that
// passes (a full disk, a locked file) heals by itself; one that does not (a handler that
// cannot apply an event) stays visible until the projection or the event is fixed.
func (rn *run) retry(ctx context.Context, step func() error) error {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 30*time.Second) {
		err := step()
		if err == nil {
			rn.mu.Lock()
			if rn.state == StateFailed {
				rn.state, rn.err = StateCatchingUp, nil
				if rn.rebuild != nil {
					rn.state = StateRebuilding
				}
				rn.r.log().Info("projection recovered", "projection", rn.p.Name())
			}
			rn.mu.Unlock()
			return nil
		}
		rn.fail(ctx, err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (rn *run) setState(s State, err error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.state, rn.err = s, err
}

func (rn *run) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		rn.setState(StateStopped, nil)
		return
	}
	rn.r.log().Error("projection failed", "projection", rn.p.Name(), "error", err)
	rn.setState(StateFailed, err)
}
