package eventstore

import (
	"context"
	"errors"
	"iter"
	"slices"
	"testing"
	"time"
)

// dropping is a log of events 1..n whose subscriptions drop after `every` events they yield,
// or at its end, and which is closed after `closeAfter` subscriptions (never if 0).
type dropping struct {
	n, every, closeAfter int
	subscribed           []uint64 // the After of each subscription
}

func (d *dropping) SubscribeAll(ctx context.Context, opts SubscribeOptions) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		d.subscribed = append(d.subscribed, opts.After.Commit)
		if d.closeAfter > 0 && len(d.subscribed) > d.closeAfter {
			yield(RecordedEvent{}, ErrClosed)
			return
		}
		for i, p := 0, opts.After.Commit+1; p <= uint64(d.n); i, p = i+1, p+1 {
			if i == d.every {
				yield(RecordedEvent{}, errors.New("connection reset"))
				return
			}
			if !yield(RecordedEvent{Position: Position{Commit: p}}, nil) {
				return
			}
		}
		yield(RecordedEvent{}, errors.New("idle"))
	}
}

func (d *dropping) ReadAll(context.Context, ReadAllOptions) iter.Seq2[RecordedEvent, error] {
	panic("not read")
}

func (d *dropping) Head(context.Context) (Position, error) { panic("not read") }

// Follow hands on every event once, in order, subscribing again after the last one handed on
// whenever a subscription drops, until the store is closed, the handler fails or ctx ends.
func TestFollowResubscribesAfterTheLastEventHandedOn(t *testing.T) {
	d := &dropping{n: 10, every: 3, closeAfter: 6}
	var got []uint64
	drops := 0
	err := Follow(context.Background(), d, SubscribeOptions{}, func(error) { drops++ }, func(e RecordedEvent) error {
		got = append(got, e.Position.Commit)
		return nil
	})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Follow = %v; want ErrClosed", err)
	}
	for i, p := range got {
		if p != uint64(i+1) {
			t.Fatalf("handed on %v; want 1..10 once each, in order", got)
		}
	}
	if want := []uint64{0, 3, 6, 9, 10, 10, 10}; len(got) != 10 || drops != 6 || !slices.Equal(d.subscribed, want) {
		t.Errorf("handed on %v after subscriptions at %v with %d drops", got, d.subscribed, drops)
	}

	stop := errors.New("stop")
	if err := Follow(context.Background(), &dropping{n: 10, every: 100}, SubscribeOptions{}, func(error) {}, func(e RecordedEvent) error {
		if e.Position.Commit == 4 {
			return stop
		}
		return nil
	}); err != stop {
		t.Errorf("Follow with a failing handler = %v; want its error", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Follow(ctx, &dropping{n: 2, every: 100}, SubscribeOptions{}, func(error) {}, func(RecordedEvent) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Follow when ctx ends = %v", err)
	}
}
