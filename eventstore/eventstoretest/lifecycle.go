package eventstoretest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/google/go-cmp/cmp"
)

func testCancelledContext(t *testing.T, s *suite) {
	f := s.setup(t)
	stream, fresh := f.stream("s"), f.stream("fresh")
	// Given a stream of three events,
	given := NewEvents(3)
	f.append(t, stream, eventstore.NoStream, given...)

	for _, c := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
		want error
	}{
		{"Cancelled", func(t *testing.T) context.Context {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return ctx
		}, context.Canceled},
		{"DeadlineExceeded", func(t *testing.T) context.Context {
			ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded},
	} {
		// when each method is called with a context that is already done, then it fails
		// with the context's error and changes nothing.
		t.Run(c.name, func(t *testing.T) {
			wantCtxErr := func(t *testing.T, err error) {
				t.Helper()
				if !errors.Is(err, c.want) {
					t.Errorf("error = %v, want one matching %v", err, c.want)
				}
			}
			t.Run("Append", func(t *testing.T) {
				extra := NewEvents(1)
				_, err := f.b.Append(c.ctx(t), stream, eventstore.Exact(2), extra...)
				wantCtxErr(t, err)
				f.wantStream(t, stream, 0, given...)
			})
			t.Run("AppendToNewStream", func(t *testing.T) {
				_, err := f.b.Append(c.ctx(t), fresh, eventstore.NoStream, NewEvents(1)...)
				wantCtxErr(t, err)
				f.wantNotFound(t, fresh)
			})
			t.Run("ReadStream", func(t *testing.T) {
				_, err := collect(t, f.b.ReadStream(c.ctx(t), stream, eventstore.ReadStreamOptions{}))
				wantCtxErr(t, err)
			})
			t.Run("ReadAll", func(t *testing.T) {
				_, err := collect(t, f.b.ReadAll(c.ctx(t), eventstore.ReadAllOptions{Filter: f.own()}))
				wantCtxErr(t, err)
			})
			t.Run("DeleteStream", func(t *testing.T) {
				wantCtxErr(t, f.b.DeleteStream(c.ctx(t), stream, eventstore.Any))
				f.wantStream(t, stream, 0, given...)
			})
			t.Run("Head", func(t *testing.T) {
				_, err := f.b.Head(c.ctx(t))
				wantCtxErr(t, err)
			})
			t.Run("Ping", func(t *testing.T) {
				wantCtxErr(t, f.b.Ping(c.ctx(t)))
			})
			t.Run("SubscribeAll", func(t *testing.T) {
				sub := f.subscribeCtx(t, c.ctx(t), eventstore.SubscribeOptions{Filter: f.own()})
				wantCtxErr(t, sub.wait(t))
			})
		})
	}
}

func testCloseAndReopen(t *testing.T, s *suite) {
	f := s.setup(t)
	a, b, gone := f.stream("a"), f.stream("b"), f.stream("gone")
	// Given several streams, one of them deleted,
	a1, a2, b1 := NewEvents(3), NewEvents(2), NewEvents(2)
	r1 := f.append(t, a, eventstore.NoStream, a1...)
	f.append(t, b, eventstore.NoStream, b1...)
	f.append(t, a, eventstore.Exact(2), a2...)
	f.give(t, gone, deleted)
	readA, readB, log := f.read(t, a, eventstore.ReadStreamOptions{}), f.read(t, b, eventstore.ReadStreamOptions{}), f.log(t)

	// when the store is closed and reopened,
	f.close(t)
	f.reopen(t)

	// then it holds the same events in the same places,
	same := func(t *testing.T, what string, want, got []eventstore.RecordedEvent) {
		t.Helper()
		if diff := cmp.Diff(want, got, equalRecorded); diff != "" {
			t.Errorf("%s after reopening (-before +after):\n%s", what, diff)
		}
	}
	same(t, "stream a", readA, f.read(t, a, eventstore.ReadStreamOptions{}))
	same(t, "stream b", readB, f.read(t, b, eventstore.ReadStreamOptions{}))
	same(t, "log", log, f.log(t))
	f.wantNotFound(t, gone)
	head, err := f.b.Head(t.Context())
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if head.Compare(log[len(log)-1].Position) < 0 {
		t.Errorf("Head after reopening = %v, before the last event's position %v", head, log[len(log)-1].Position)
	}

	// recognises repeated appends,
	if res, err := f.b.Append(t.Context(), a, eventstore.NoStream, a1...); err != nil || !res.Same(r1) {
		t.Errorf("repeating the first append after reopening: %+v, %v; want the original %+v", res, err, r1)
	}

	// and appends after the revisions and positions it had.
	a3, b2, again := NewEvents(1), NewEvents(2), NewEvents(1)
	appended := []eventstore.AppendResult{
		f.append(t, a, eventstore.Exact(4), a3...),
		f.append(t, b, eventstore.Exact(1), b2...),
		f.append(t, gone, eventstore.NoStream, again...),
	}
	for i, want := range []uint64{5, 3, 3} {
		if appended[i].Revision != want {
			t.Errorf("append %d after reopening: revision %d, want %d", i, appended[i].Revision, want)
		}
	}
	after := f.log(t)
	wantIncreasing(t, "log after reopening", after)
	if diff := cmp.Diff(refsOf(log), refsOf(after[:min(len(log), len(after))])); diff != "" {
		t.Errorf("log after reopening and appending, first part (-before +after):\n%s", diff)
	}

	// Once more, to see that what was appended after reopening was kept too.
	f.close(t)
	f.reopen(t)
	f.wantStream(t, a, 0, slices.Concat(a1, a2, a3)...)
	f.wantStream(t, b, 0, slices.Concat(b1, b2)...)
	f.wantStream(t, gone, 3, again...)
	same(t, "log", after, f.log(t))
}

func testCallsAfterClose(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	f.append(t, stream, eventstore.NoStream, NewEvents(2)...)
	if err := f.b.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of an open store: %v", err)
	}
	// Given a closed store,
	f.close(t)

	// when it is called, then every call fails with ErrClosed.
	wantClosed := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, eventstore.ErrClosed) {
			t.Errorf("error = %v, want one matching ErrClosed", err)
		}
	}
	ctx := t.Context()
	t.Run("Append", func(t *testing.T) {
		_, err := f.b.Append(ctx, stream, eventstore.Exact(1), NewEvents(1)...)
		wantClosed(t, err)
	})
	t.Run("ReadStream", func(t *testing.T) {
		events, err := collect(t, f.b.ReadStream(ctx, stream, eventstore.ReadStreamOptions{}))
		wantClosed(t, err)
		if len(events) > 0 {
			t.Errorf("yielded %d events, want none", len(events))
		}
	})
	t.Run("ReadAll", func(t *testing.T) {
		events, err := collect(t, f.b.ReadAll(ctx, eventstore.ReadAllOptions{Filter: f.own()}))
		wantClosed(t, err)
		if len(events) > 0 {
			t.Errorf("yielded %d events, want none", len(events))
		}
	})
	t.Run("DeleteStream", func(t *testing.T) {
		wantClosed(t, f.b.DeleteStream(ctx, stream, eventstore.Any))
	})
	t.Run("Head", func(t *testing.T) {
		_, err := f.b.Head(ctx)
		wantClosed(t, err)
	})
	t.Run("Ping", func(t *testing.T) {
		wantClosed(t, f.b.Ping(ctx))
	})
	t.Run("SubscribeAll", func(t *testing.T) {
		sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: f.own()})
		wantClosed(t, sub.wait(t))
	})

	// and reopening finds the stream untouched.
	f.reopen(t)
	if got := f.read(t, stream, eventstore.ReadStreamOptions{}); len(got) != 2 {
		t.Errorf("after reopening, the stream has %d events, want 2", len(got))
	}
}

func testSubscriptionEndsOnClose(t *testing.T, s *suite) {
	f := s.setup(t)
	stream := f.stream("s")
	f.append(t, stream, eventstore.NoStream, NewEvents(1)...)
	// Given a live subscription,
	sub := f.subscribe(t, eventstore.SubscribeOptions{Filter: f.own()})
	sub.next(t)
	f.wantNextIs(t, sub, stream)

	// when the store closes,
	f.close(t)

	// then the subscription ends with ErrClosed.
	if err := sub.wait(t); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("the subscription ended with %v, want an error matching ErrClosed", err)
	}
}
