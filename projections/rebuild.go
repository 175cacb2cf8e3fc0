package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// Rebuild starts rebuilding the named projection, to swap it in (or starts nothing if such a
// rebuild is running).
func (r *Runner) Rebuild(name string) error {
	return r.RebuildWith(name, RebuildOptions{Swap: true})
}

// ErrRebuildRunning: a rebuild asked to do something else is running.
var ErrRebuildRunning = errors.New("another rebuild is running")

// RebuildWith starts rebuilding the named projection with opts. A request while a rebuild
// with the same options runs, or is asked for, joins it; with other options it fails with
// ErrRebuildRunning.
func (r *Runner) RebuildWith(name string, opts RebuildOptions) error {
	r.init()
	rn, ok := r.runs[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProjection, name)
	}
	if !opts.Compare {
		opts.Swap = true
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	running := rn.rebuild
	if running == nil && len(rn.rebuildReq) > 0 {
		running = &RebuildStatus{RebuildOptions: rn.requested}
	}
	switch {
	case running != nil && running.RebuildOptions == opts:
		return nil // a request during a rebuild joins it
	case running != nil:
		return fmt.Errorf("%w: projection %s is rebuilding with %+v", ErrRebuildRunning, name, running.RebuildOptions)
	}
	rn.requested = opts
	rn.rebuildReq <- struct{}{} // room: the channel holds one and was empty
	return nil
}

// startRequested starts the rebuild that rebuildReq asked for.
func (rn *run) startRequested(ctx context.Context) error {
	rn.mu.Lock()
	opts := rn.requested
	rn.mu.Unlock()
	return rn.startRebuild(ctx, opts)
}

func (rn *run) startRebuild(ctx context.Context, opts RebuildOptions) error {
	rn.mu.Lock()
	if rn.rebuild != nil {
		rn.mu.Unlock()
		return nil
	}
	gen := rn.generation + 1
	rn.mu.Unlock()
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := rn.createGeneration(ctx, tx, gen); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_generation = ?, shadow_commit = 0, shadow_prepare = 0,
			shadow_version = ?, shadow_mode = ? WHERE name = ?`, gen, rn.p.Version(), opts.mode(), rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("start rebuild: %w", err)
	}
	rn.mu.Lock()
	rn.rebuild = &RebuildStatus{Generation: gen, Started: time.Now(), RebuildOptions: opts}
	rn.state = StateRebuilding
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuild started", "projection", rn.p.Name(), "generation", gen)
	return nil
}

// rebuildStep applies one batch of the log to the shadow generation; once the shadow has
// caught up with the live checkpoint it swaps the generations. It reports whether the rebuild
// is done.
func (rn *run) rebuildStep(ctx context.Context) (bool, error) {
	rn.mu.Lock()
	rb := *rn.rebuild
	rn.mu.Unlock()
	// ReadAll's From is inclusive: the event at the checkpoint comes again and is skipped.
	var batch []eventstore.RecordedEvent
	var last eventstore.RecordedEvent
	read := 0
	filter := rn.p.Filter()
	// One live batch's worth per step: live events wait for each step, so steps stay short.
	limit := rn.r.batchSize()
	for e, err := range rn.r.Feed.ReadAll(ctx, eventstore.ReadAllOptions{From: rb.Checkpoint, Limit: uint64(limit)}) {
		if err != nil {
			return false, err
		}
		read++
		if e.Position.Compare(rb.Checkpoint) > 0 {
			last = e
			if filter.Match(e.Stream) && rn.applies(e.Type) {
				batch = append(batch, e)
			}
		}
	}
	if last.Position.Compare(rb.Checkpoint) > 0 {
		ctx := statementContext(ctx)
		err := rn.tx(ctx, func(tx *sql.Tx) error {
			if err := rn.p.Apply(ctx, tx, tablesOf(rn.p, rb.Generation), batch); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_commit = ?, shadow_prepare = ? WHERE name = ?`,
				last.Position.Commit, last.Position.Prepare, rn.p.Name())
			return err
		})
		if err != nil {
			return false, err
		}
		rn.mu.Lock()
		rn.rebuild.Checkpoint, rn.rebuildAt = last.Position, last.Recorded
		rn.rebuild.Applied += uint64(len(batch))
		rb = *rn.rebuild
		rn.mu.Unlock()
	}
	rn.mu.Lock()
	live := rn.checkpoint
	rn.mu.Unlock()
	if read == limit || rb.Checkpoint.Compare(live) < 0 {
		return false, nil // not caught up yet
	}
	if !rb.Compare {
		return true, rn.swap(ctx, rb)
	}
	if rb.Checkpoint.Compare(live) > 0 {
		return false, nil // the live generation has yet to apply what the rebuild has: see waitLive
	}
	return true, rn.finishCompared(ctx, rb)
}

// waitLive takes the next live event into batch. It waits for one only while a rebuild that
// compares is ahead of the live generation, which must reach the same position first; else
// it takes one if one is there, so that the rebuild's next step comes at once. It reports
// false when ctx ends.
func (rn *run) waitLive(ctx context.Context, events <-chan eventstore.RecordedEvent, batch *[]eventstore.RecordedEvent) bool {
	rn.mu.Lock()
	ahead := rn.rebuild != nil && rn.rebuild.Compare && rn.rebuild.Checkpoint.Compare(rn.checkpoint) > 0
	rn.mu.Unlock()
	if !ahead {
		select {
		case e := <-events:
			*batch = append(*batch, e)
		default:
		}
		return true
	}
	select {
	case e := <-events:
		*batch = append(*batch, e)
		return true
	case <-ctx.Done():
		return false
	}
}

// finishCompared compares the rebuilt generation with the live one, both at rb.Checkpoint,
// then swaps it in or drops it, as the rebuild was asked. Both happen in the projection's
// loop, between live batches: neither generation moves while they are compared.
func (rn *run) finishCompared(ctx context.Context, rb RebuildStatus) error {
	rn.mu.Lock()
	live := rn.generation
	rn.mu.Unlock()
	c, err := compareGenerations(ctx, rn.r.DB, rn.p, live, rb.Generation)
	if err != nil {
		return err
	}
	c.At, c.Started, c.Swapped = rb.Checkpoint, rb.Started, rb.Swap
	if rb.Swap {
		err = rn.swap(ctx, rb)
	} else {
		err = rn.dropRebuild(ctx, rb)
	}
	if err != nil {
		return err
	}
	c.Finished = time.Now()
	rn.mu.Lock()
	rn.comparison = &c
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuild compared", "projection", rn.p.Name(), "generation", rb.Generation,
		"added", c.Added, "removed", c.Removed, "changed", c.Changed, "swapped", c.Swapped)
	return nil
}

// dropRebuild drops the rebuilt generation, leaving the live one as it is.
func (rn *run) dropRebuild(ctx context.Context, rb RebuildStatus) error {
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		for _, table := range tablesOf(rn.p, rb.Generation) {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET shadow_generation = NULL, shadow_commit = NULL,
			shadow_prepare = NULL, shadow_version = NULL, shadow_mode = NULL WHERE name = ?`, rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("drop rebuilt generation: %w", err)
	}
	rn.mu.Lock()
	rn.rebuild, rn.state = nil, StateLive
	rn.mu.Unlock()
	return nil
}

// swap makes the rebuilt generation live, in one transaction.
func (rn *run) swap(ctx context.Context, rb RebuildStatus) error {
	rn.mu.Lock()
	old := rn.generation
	rn.mu.Unlock()
	err := rn.tx(ctx, func(tx *sql.Tx) error {
		if err := pointViews(ctx, tx, rn.p, rb.Generation); err != nil {
			return err
		}
		for _, table := range tablesOf(rn.p, old) {
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE projection_checkpoints SET generation = ?, commit_position = ?, prepare_position = ?,
			version = ?, shadow_generation = NULL, shadow_commit = NULL, shadow_prepare = NULL, shadow_version = NULL, shadow_mode = NULL
			WHERE name = ?`,
			rb.Generation, rb.Checkpoint.Commit, rb.Checkpoint.Prepare, rn.p.Version(), rn.p.Name())
		return err
	})
	if err != nil {
		return fmt.Errorf("swap generations: %w", err)
	}
	rn.mu.Lock()
	rn.generation, rn.rebuild, rn.state, rn.outdated = rb.Generation, nil, StateLive, false
	if rb.Checkpoint.Compare(rn.checkpoint) > 0 {
		rn.checkpoint = rb.Checkpoint
	}
	close(rn.advanced)
	rn.advanced = make(chan struct{})
	rn.mu.Unlock()
	rn.r.log().Info("projection rebuilt", "projection", rn.p.Name(), "generation", rb.Generation, "events", rb.Applied)
	return nil
}
