package kurrenttest_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// These tests pin the server's KurrentDB behaviour where the store contract says otherwise, or
// says nothing, talking to it through the client directly.

func start(t *testing.T, cfg kurrenttest.Config) *esdb.Client {
	t.Helper()
	srv, err := kurrenttest.Start("127.0.0.1:0", t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conf, err := esdb.ParseConnectionString(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	conf.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func event(id uuid.UUID) esdb.EventData {
	return esdb.EventData{EventID: id, EventType: "test.v1", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}
}

func appendTo(t *testing.T, c *esdb.Client, stream string, expected esdb.ExpectedRevision, ids ...uuid.UUID) (*esdb.WriteResult, error) {
	t.Helper()
	events := make([]esdb.EventData, len(ids))
	for i, id := range ids {
		events[i] = event(id)
	}
	return c.AppendToStream(t.Context(), stream, esdb.AppendToStreamOptions{ExpectedRevision: expected}, events...)
}

func mustAppend(t *testing.T, c *esdb.Client, stream string, expected esdb.ExpectedRevision, ids ...uuid.UUID) *esdb.WriteResult {
	t.Helper()
	res, err := appendTo(t, c, stream, expected, ids...)
	if err != nil {
		t.Fatalf("append to %s: %v", stream, err)
	}
	return res
}

// read returns the ids in a stream, or the read's error.
func read(t *testing.T, c *esdb.Client, stream string) ([]uuid.UUID, error) {
	t.Helper()
	rs, err := c.ReadStream(t.Context(), stream, esdb.ReadStreamOptions{}, 1000)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var ids []uuid.UUID
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return ids, err
		}
		ids = append(ids, ev.OriginalEvent().EventID)
	}
}

func code(err error) esdb.ErrorCode {
	var e *esdb.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return -1
}

func TestEventIDsAreNotUniqueAcrossStreams(t *testing.T) {
	c := start(t, kurrenttest.Config{})
	id := uuid.New()
	mustAppend(t, c, "a", esdb.NoStream{}, id)
	mustAppend(t, c, "b", esdb.NoStream{}, id)
	for _, s := range []string{"a", "b"} {
		if ids, err := read(t, c, s); err != nil || len(ids) != 1 || ids[0] != id {
			t.Errorf("stream %s: %v, %v; want the one event", s, ids, err)
		}
	}
}

func TestAnyRecognisesRepeatsWithinTheWindowOnly(t *testing.T) {
	c := start(t, kurrenttest.Config{IdempotencyWindow: 2})
	e1, e2 := uuid.New(), uuid.New()
	first := mustAppend(t, c, "s", esdb.Any{}, e1, e2)
	again := mustAppend(t, c, "s", esdb.Any{}, e1, e2)
	if again.NextExpectedVersion != first.NextExpectedVersion || again.CommitPosition != first.CommitPosition {
		t.Errorf("repeat at Any: %+v, want the original %+v", again, first)
	}
	if _, err := appendTo(t, c, "s", esdb.Any{}, e1, uuid.New()); code(err) != esdb.ErrorCodeWrongExpectedVersion {
		t.Errorf("a partial repeat at Any: %v; want a wrong expected version", err)
	}
	// Two more ids push e1 and e2 out of a window of two: a repeat is then written again.
	mustAppend(t, c, "other", esdb.Any{}, uuid.New(), uuid.New())
	mustAppend(t, c, "s", esdb.Any{}, e1)
	if ids, _ := read(t, c, "s"); len(ids) != 3 || ids[2] != e1 {
		t.Errorf("stream s: %v; want e1, e2, e1", ids)
	}
}

func TestWrongExpectedVersionCarriesTheCurrentRevision(t *testing.T) {
	c := start(t, kurrenttest.Config{})
	mustAppend(t, c, "s", esdb.NoStream{}, uuid.New(), uuid.New(), uuid.New())
	_, err := appendTo(t, c, "s", esdb.StreamRevision{Value: 5}, uuid.New())
	// The client keeps the versions only in its message.
	if code(err) != esdb.ErrorCodeWrongExpectedVersion || !strings.Contains(err.Error(), "expecting '5' but got '2'") {
		t.Errorf("append at 5 to a stream at 2: %v", err)
	}
	_, err = c.DeleteStream(t.Context(), "s", esdb.DeleteStreamOptions{ExpectedRevision: esdb.StreamRevision{Value: 5}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("delete at 5 of a stream at 2: %v; want a FailedPrecondition status", err)
	}
}

func TestSoftDelete(t *testing.T) {
	c := start(t, kurrenttest.Config{})
	old := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	mustAppend(t, c, "s", esdb.NoStream{}, old...)
	if _, err := c.DeleteStream(t.Context(), "s", esdb.DeleteStreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := read(t, c, "s"); code(err) != esdb.ErrorCodeResourceNotFound {
		t.Errorf("read after delete: %v; want stream not found", err)
	}
	if _, err := appendTo(t, c, "s", esdb.StreamExists{}, uuid.New()); code(err) != esdb.ErrorCodeStreamDeleted {
		t.Errorf("append at StreamExists after delete: %v; want stream deleted", err)
	}
	// The last revision still matches, and recreates the stream from the next one.
	fresh := uuid.New()
	if res := mustAppend(t, c, "s", esdb.StreamRevision{Value: 2}, fresh); res.NextExpectedVersion != 3 {
		t.Errorf("append at 2 after delete: revision %d, want 3", res.NextExpectedVersion)
	}
	if ids, err := read(t, c, "s"); err != nil || len(ids) != 1 || ids[0] != fresh {
		t.Errorf("read after recreation: %v, %v; want only the new event", ids, err)
	}
	meta, err := c.GetStreamMetadata(t.Context(), "s", esdb.ReadStreamOptions{})
	if err != nil || meta.TruncateBefore() == nil || *meta.TruncateBefore() != 3 {
		t.Errorf("metadata after recreation: %+v, %v; want $tb 3", meta, err)
	}
	// $all still has the deleted events.
	rs, err := c.ReadAll(t.Context(), esdb.ReadAllOptions{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	n := 0
	for {
		ev, err := rs.Recv()
		if err != nil {
			break
		}
		if ev.OriginalEvent().StreamID == "s" {
			n++
		}
	}
	if n != 4 {
		t.Errorf("$all holds %d events of s, want 4", n)
	}
}

func TestFilteredSubscription(t *testing.T) {
	c := start(t, kurrenttest.Config{})
	for _, s := range []string{"keep-1", "drop-1", "keep-2"} {
		mustAppend(t, c, s, esdb.Any{}, uuid.New())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{
		From:               esdb.Start{},
		Filter:             &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Regex: `^(?!\$)(?!drop-)`},
		MaxSearchWindow:    1,
		CheckpointInterval: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var streams []string
	checkpoints := 0
	for len(streams) < 2 {
		msg := sub.Recv()
		switch {
		case msg.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v (streams %v)", msg.SubscriptionDropped.Error, streams)
		case msg.EventAppeared != nil:
			streams = append(streams, msg.EventAppeared.OriginalEvent().StreamID)
		case msg.CheckPointReached != nil:
			checkpoints++
		}
	}
	if strings.Join(streams, ",") != "keep-1,keep-2" || checkpoints == 0 {
		t.Errorf("streams %v, %d checkpoints; want keep-1 and keep-2, and checkpoints", streams, checkpoints)
	}
}

// The client pings every 10 s (KeepAliveInterval, which gRPC will not let go lower) even on an
// idle connection; a server that calls that too many pings sends GOAWAY after three of them
// and takes an idle subscription down with the connection.
func TestIdleSubscriptionOutlivesClientKeepalivePings(t *testing.T) {
	if testing.Short() {
		t.Skip("idles for over a minute")
	}
	t.Parallel()
	c := start(t, kurrenttest.Config{})
	// The deadline ends the subscription, as a drop, if the event never arrives.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: esdb.End{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs := make(chan *esdb.SubscriptionEvent)
	go func() {
		for {
			msg := sub.Recv()
			select {
			case msgs <- msg:
			case <-t.Context().Done():
				return
			}
			if msg.SubscriptionDropped != nil {
				return
			}
		}
	}()
	select {
	case msg := <-msgs:
		if msg.SubscriptionDropped != nil {
			t.Fatalf("idle subscription dropped: %v", msg.SubscriptionDropped.Error)
		}
		t.Fatalf("idle subscription got %+v before anything was appended", msg)
	case <-time.After(65 * time.Second):
	}
	id := uuid.New()
	mustAppend(t, c, "after-idle", esdb.NoStream{}, id)
	for msg := range msgs {
		switch {
		case msg.SubscriptionDropped != nil:
			t.Fatalf("dropped: %v", msg.SubscriptionDropped.Error)
		case msg.EventAppeared != nil && msg.EventAppeared.OriginalEvent().EventID == id:
			return
		}
	}
}
