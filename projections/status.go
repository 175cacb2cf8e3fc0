package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// Status reports every projection, in the order given.
func (r *Runner) Status(ctx context.Context) ([]Status, error) {
	r.init()
	head, err := r.Feed.Head(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(r.Projections))
	for _, p := range r.Projections {
		rn := r.runs[p.Name()]
		rn.mu.Lock()
		cp, lastAt := rn.checkpoint, rn.lastAt
		if rn.outdated && rn.rebuild != nil {
			// What it will serve first is the rebuild's: the live generation serves nothing.
			cp, lastAt = rn.rebuild.Checkpoint, rn.rebuildAt
		}
		s := Status{Name: p.Name(), State: rn.state, Generation: rn.generation, Checkpoint: cp, Head: head}
		if s.State == StateCatchingUp && cp.Compare(head) >= 0 {
			s.State = StateLive // nothing arrived since it caught up at start
		}
		if rn.err != nil {
			s.Error = rn.err.Error()
		}
		if rn.rebuild != nil {
			rb := *rn.rebuild
			s.Rebuild = &rb
		}
		s.Comparison = rn.comparison // never changed once set: shared
		if head.Commit > cp.Commit {
			s.LagEvents = head.Commit - cp.Commit
			if !lastAt.IsZero() {
				s.LagSeconds = time.Since(lastAt).Seconds()
			}
		}
		rn.mu.Unlock()
		out = append(out, s)
	}
	return out, nil
}

// ErrBehind: the projection did not reach the position in time, or is failing and cannot.
var ErrBehind = errors.New("read model is behind the requested position")

// WaitFor waits until projection name has applied every event up to pos, or until ctx ends
// (ErrBehind). A failed projection fails at once. While it waits, the projection applies
// events as they arrive instead of lingering.
//
// A projection being rebuilt because its live generation is of another version has reached
// no position until the rebuild is swapped in: queries must not read its tables before. Call
// WaitFor before every query of a projection, with the zero position if any will do.
func (r *Runner) WaitFor(ctx context.Context, name string, pos eventstore.Position) error {
	r.init()
	rn, ok := r.runs[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownProjection, name)
	}
	rn.mu.Lock()
	reached := rn.checkpoint.Compare(pos) >= 0 && !rn.outdated
	rn.mu.Unlock()
	if reached {
		return nil // no need to hurry the projection
	}
	rn.addWaiter()
	defer rn.removeWaiter()
	for {
		rn.mu.Lock()
		reached := rn.checkpoint.Compare(pos) >= 0 && !rn.outdated
		failed, err := rn.state == StateFailed, rn.err
		advanced := rn.advanced
		rn.mu.Unlock()
		switch {
		case reached:
			return nil
		case failed:
			return fmt.Errorf("%w: projection %s is failing: %v", ErrBehind, name, err)
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s at %v", ErrBehind, name, pos)
		}
	}
}

// addWaiter counts a WaitFor that has to wait. The first one stops a linger in progress: while
// anyone waits, the projection applies what it has at once.
func (rn *run) addWaiter() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.waiters++
	if rn.waiters == 1 {
		close(rn.hurry)
		rn.hurry = make(chan struct{})
	}
}

func (rn *run) removeWaiter() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.waiters--
}
