package eventstore

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// The waits of Follow before it subscribes again: doubling from the first to the longest.
const (
	followFirstWait = 100 * time.Millisecond
	followLongest   = 5 * time.Second
)

// Follow reads the log after opts.After and hands each event to each, in log order, until ctx
// ends, each fails (its error is returned) or the store is closed (ErrClosed). A subscription
// that drops is made again after the last event handed on, forever, each error told to dropped
// first; the wait before it doubles from 100 ms up to 5 s while no event comes, half of it
// drawn at random so that the nodes of a cluster do not come back at once. Every reader of the
// live log follows it this way: the projections and the webhook deliveries.
func Follow(ctx context.Context, feed Feed, opts SubscribeOptions, dropped func(error), each func(RecordedEvent) error) error {
	wait := followFirstWait
	for {
		for e, err := range feed.SubscribeAll(ctx, opts) {
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrClosed) {
					return cmp.Or(ctx.Err(), err)
				}
				dropped(err)
				break
			}
			wait = followFirstWait
			if err := each(e); err != nil {
				return err
			}
			opts.After = e.Position
		}
		t := time.NewTimer(wait/2 + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, followLongest)
	}
}
