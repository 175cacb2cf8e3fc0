package kurrent_test

import (
	"context"
	"errors"
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

// $maxAge hides old events from stream reads: the stream then reads as not found, keeps its
// revision for appends, and its events stay in $all until a scavenge.
func TestSetMaxAge(t *testing.T) {
	srv := StartServer(t)
	s := MustOpen(t, srv.URL())
	t.Cleanup(func() { s.Close() })
	const stream = "maxage/key"
	eventstoretest.MustAppend(t, s, stream, eventstore.NoStream, eventstoretest.NewEvents(2)...)
	if err := s.SetMaxAge(t.Context(), stream, time.Second); err != nil {
		t.Fatal(err)
	}
	if events, err := eventstoretest.Collect(s.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{})); err != nil || len(events) != 2 {
		t.Fatalf("before expiry: %d events, %v; want 2", len(events), err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := eventstoretest.Collect(s.ReadStream(t.Context(), stream, eventstore.ReadStreamOptions{}))
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after expiry: read ended with %v, want ErrStreamNotFound", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	_, err := s.Append(t.Context(), stream, eventstore.NoStream, eventstoretest.NewEvents(1)...)
	var wrong *eventstore.WrongExpectedRevisionError
	if !errors.As(err, &wrong) {
		t.Errorf("append with NoStream after expiry: %v; want a wrong expected revision (KurrentDB keeps the revision)", err)
	}
	if res, err := s.Append(t.Context(), stream, eventstore.Exact(1), eventstoretest.NewEvents(1)...); err != nil || res.Revision != 2 {
		t.Errorf("append at the last revision after expiry: %+v, %v; want revision 2", res, err)
	}
	log, err := eventstoretest.Collect(s.ReadAll(t.Context(), eventstore.ReadAllOptions{Filter: eventstore.Filter{StreamPrefixes: []string{"maxage/"}}}))
	if err != nil || len(log) != 3 {
		t.Errorf("$all: %d events, %v; want all 3", len(log), err)
	}
}
