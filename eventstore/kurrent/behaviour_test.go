package kurrent_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
)

// A subscription outlives its server: when the server stops and comes back on the same address
// and data, it resubscribes after the last event it yielded and goes on, skipping none and
// repeating none.
func TestSubscriptionSurvivesServerRestart(t *testing.T) {
	for _, down := range []time.Duration{0, 3 * time.Second} {
		t.Run(down.String(), func(t *testing.T) { testSurvivesRestart(t, down) })
	}
}

// down is how long the server stays away: past a few seconds the client gives up rediscovering
// it and closes itself, and the store replaces it.
func testSurvivesRestart(t *testing.T, down time.Duration) {
	dir := t.TempDir()
	srv, err := kurrenttest.Start("127.0.0.1:0", dir, kurrenttest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	s := MustOpen(t, srv.URL())
	t.Cleanup(func() { s.Close() })
	events := eventstoretest.NewEvents(3)
	eventstoretest.MustAppend(t, s, "restart/s", eventstore.NoStream, events[0])

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan eventstore.RecordedEvent, 10)
	ended := make(chan error, 1)
	go func() {
		for e, err := range s.SubscribeAll(ctx, eventstore.SubscribeOptions{Filter: eventstore.Filter{StreamPrefixes: []string{"restart/"}}}) {
			if err != nil {
				ended <- err
				return
			}
			got <- e
		}
	}()
	next := func(want int) {
		t.Helper()
		select {
		case e := <-got:
			if e.ID != events[want].ID || e.Revision != uint64(want) {
				t.Fatalf("subscription yielded %s@%d (%s), want revision %d (%s)", e.Stream, e.Revision, e.ID, want, events[want].ID)
			}
		case err := <-ended:
			t.Fatalf("subscription ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatalf("no event %d from the subscription within 30s", want)
		}
	}
	next(0)

	// When the server stops and starts again,
	srv.Close()
	time.Sleep(down)
	for i := 0; ; i++ {
		if srv, err = kurrenttest.Start(addr, dir, kurrenttest.Config{}); err == nil {
			break
		} else if i == 50 {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { srv.Close() })

	// then appends go through again (the first ones may find the connection down; retrying
	// at an exact revision is safe),
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.Append(t.Context(), "restart/s", eventstore.Exact(0), events[1])
		if err == nil {
			break
		}
		if !errors.Is(err, eventstore.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("append after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// and the subscription yields the new events, once each.
	next(1)
	eventstoretest.MustAppend(t, s, "restart/s", eventstore.Exact(1), events[2])
	next(2)
	select {
	case e := <-got:
		t.Errorf("extra event %s@%d", e.Stream, e.Revision)
	case <-time.After(200 * time.Millisecond):
	}
}

// $maxAge hides old events from stream reads: the stream then reads as not found, an append
// with NoStream goes on from its last revision (of two racing, one wins), and the old events
// stay in $all until a scavenge.
func TestMaxAgeExpiry(t *testing.T) {
	srv := StartServer(t)
	s := MustOpen(t, srv.URL())
	t.Cleanup(func() { s.Close() })
	streams := []string{"maxage/a", "maxage/b", "maxage/c"}
	for _, stream := range streams {
		eventstoretest.MustAppend(t, s, stream, eventstore.NoStream, eventstoretest.NewEvents(2)...)
		if err := s.SetMaxAge(t.Context(), stream, time.Second); err != nil {
			t.Fatal(err)
		}
		if events, err := eventstoretest.Collect(s.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{})); err != nil || len(events) != 2 {
			t.Fatalf("%s before expiry: %d events, %v; want 2", stream, len(events), err)
		}
	}
	// Setting it again changes nothing.
	if err := s.SetMaxAge(t.Context(), streams[0], 900*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	// When their events are past $maxAge, the streams read as not found,
	deadline := time.Now().Add(10 * time.Second)
	for _, stream := range streams {
		for {
			_, err := eventstoretest.Collect(s.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{}))
			if errors.Is(err, eventstore.ErrStreamNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after expiry: read ended with %v, want ErrStreamNotFound", stream, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// and of two appends with NoStream, one goes on at the next revision and the other is
	// refused.
	for _, stream := range streams {
		events := eventstoretest.NewEvents(2)
		var results [2]eventstore.AppendResult
		var errs [2]error
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { results[i], errs[i] = s.Append(t.Context(), stream, eventstore.NoStream, events[i]) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			var wrong *eventstore.WrongExpectedRevisionError
			switch {
			case err == nil && results[i].Revision == 2:
				winner = i
			case errors.As(err, &wrong) && wrong.Actual == eventstore.Exact(2):
			default:
				t.Errorf("%s: append %d with NoStream: %+v, %v; want revision 2 or a wrong expected revision (actual 2)", stream, i, results[i], err)
			}
		}
		if winner < 0 || errs[1-winner] == nil {
			t.Errorf("%s: appends with NoStream: %v, %v; want exactly one to succeed", stream, errs[0], errs[1])
			continue
		}
		got, err := eventstoretest.Collect(s.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{}))
		if err != nil || len(got) != 1 || got[0].ID != events[winner].ID || got[0].Revision != 2 {
			t.Errorf("%s after the new append: %v, %v; want only the winner's event at revision 2", stream, got, err)
		}
	}

	log, err := eventstoretest.Collect(s.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{"maxage/"}}}))
	if err != nil || len(log) != 3*3 {
		t.Errorf("$all: %d events, %v; want all %d", len(log), err, 3*3)
	}
}

// An append with NoStream to a stream that merely has no metadata hiding its events is refused
// as before: hidden does not take a stream's events for expired unless its metadata can hide
// them.
func TestNoStreamOnVisibleStream(t *testing.T) {
	srv := StartServer(t)
	s := MustOpen(t, srv.URL())
	t.Cleanup(func() { s.Close() })
	const stream = "maxage/visible"
	eventstoretest.MustAppend(t, s, stream, eventstore.NoStream, eventstoretest.NewEvents(1)...)
	if err := s.SetMaxAge(t.Context(), stream, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(t.Context(), stream, eventstore.NoStream, eventstoretest.NewEvents(1)...)
	var wrong *eventstore.WrongExpectedRevisionError
	if !errors.As(err, &wrong) || wrong.Actual != eventstore.Exact(0) {
		t.Errorf("append with NoStream to a stream whose event is not expired: %v; want a wrong expected revision (actual 0)", err)
	}
}
