package api

import (
	"context"
	"errors"
	"testing"
	"time"
)

type parentKey struct{}

// A request's context is its deadline as context.WithDeadline would make it: the deadline,
// the parent's values, the end at the deadline with its error and cause. Nothing is armed
// until something asks.
func TestRequestContextEndsAtItsDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), parentKey{}, "v")
	deadline := time.Now().Add(50 * time.Millisecond)
	r := &request{parent: parent, deadline: deadline}
	if d, ok := r.Deadline(); !ok || !d.Equal(deadline) {
		t.Fatalf("Deadline() = %v, %v; want %v", d, ok, deadline)
	}
	if requestOf(r) != r {
		t.Fatal("requestOf does not find the request")
	}
	if r.ctx != nil {
		t.Fatal("a timer was armed before anything asked for the context's end")
	}
	if v := r.Value(parentKey{}); v != "v" {
		t.Fatalf("parent's value = %v", v)
	}
	child, cancel := context.WithCancel(context.WithValue(r, parentKey{}, "w"))
	defer cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline passed and the context did not end")
	}
	if !errors.Is(r.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(r), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, Cause = %v; want the deadline's", r.Err(), context.Cause(r))
	}
	if requestOf(child) != r {
		t.Fatal("requestOf does not find the request from a derived context")
	}
}

// The context ends with the request, or with its parent (the connection), whichever is first,
// whether it was asked for before or after.
func TestRequestContextEndsWithTheRequestOrItsParent(t *testing.T) {
	ended := func(t *testing.T, ctx context.Context, want error) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("not ended")
		}
		if !errors.Is(ctx.Err(), want) {
			t.Fatalf("Err() = %v; want %v", ctx.Err(), want)
		}
	}
	far := time.Now().Add(time.Hour)
	t.Run("asked before the end", func(t *testing.T) {
		r := &request{parent: context.Background(), deadline: far}
		child, cancel := context.WithCancel(r)
		defer cancel()
		r.end()
		ended(t, child, context.Canceled)
		ended(t, r, context.Canceled)
	})
	t.Run("asked after the end", func(t *testing.T) {
		r := &request{parent: context.Background(), deadline: far}
		r.end()
		ended(t, r, context.Canceled)
	})
	t.Run("parent canceled", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		r := &request{parent: parent, deadline: far}
		defer r.end()
		cancel()
		ended(t, r, context.Canceled)
	})
	t.Run("parent's earlier deadline", func(t *testing.T) {
		parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
		defer cancel()
		r := &request{parent: parent, deadline: far}
		defer r.end()
		if d, _ := r.Deadline(); !d.Before(far) {
			t.Fatalf("Deadline() = %v; want the parent's", d)
		}
	})
}
