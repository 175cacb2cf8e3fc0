package eventstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// calls is a Store that records the calls Write makes and succeeds; it sets maximum ages or
// appends to several streams at once only as its wrappers below say.
type calls struct{ made []string }

func (c *calls) Append(_ context.Context, stream string, expected ExpectedRevision, _ ...EventData) (AppendResult, error) {
	c.made = append(c.made, fmt.Sprintf("append %s@%v", stream, expected))
	return AppendResult{}, nil
}

func (c *calls) ReadStream(context.Context, string, ReadStreamOptions) iter.Seq2[RecordedEvent, error] {
	return func(func(RecordedEvent, error) bool) {}
}
func (c *calls) DeleteStream(context.Context, string, ExpectedRevision) error { return nil }
func (c *calls) Truncate(context.Context, string, uint64) error               { return nil }
func (c *calls) Ping(context.Context) error                                   { return nil }

// setter sets maximum ages.
type setter struct{ *calls }

func (s setter) SetMaxAge(_ context.Context, stream string, d time.Duration) error {
	s.made = append(s.made, fmt.Sprintf("max age %s %v", stream, d))
	return nil
}

// multi appends to several streams at once.
type multi struct{ *calls }

func (m multi) MultiStreamAppend(_ context.Context, appends ...StreamAppend) ([]AppendResult, error) {
	call := "multi"
	for _, a := range appends {
		call += fmt.Sprintf(" %s@%v/%v", a.Stream, a.Expected, a.MaxAge)
	}
	m.made = append(m.made, call)
	return make([]AppendResult, len(appends)), nil
}

// Write honours StreamAppend.MaxAge on every store that can set one: in the multi-stream append,
// even of one stream, or by SetMaxAge just before the stream's append. A store that can do
// neither, or a negative age, fails the call before anything is written.
func TestWriteSetsMaxAge(t *testing.T) {
	events := []EventData{{ID: uuid.New(), Type: "t.v1", Data: []byte(`{}`)}}
	aged := StreamAppend{Stream: "key", Expected: NoStream, Events: events, MaxAge: time.Hour}
	plain := StreamAppend{Stream: "order", Expected: Exact(3), Events: events}
	for _, c := range []struct {
		name    string
		store   func(*calls) Store
		appends []StreamAppend
		want    []string
		err     error
	}{
		{"SetterAged", func(c *calls) Store { return setter{c} }, []StreamAppend{aged, plain},
			[]string{"max age key 1h0m0s", "append key@no-stream", "append order@3"}, nil},
		{"SetterPlain", func(c *calls) Store { return setter{c} }, []StreamAppend{plain}, []string{"append order@3"}, nil},
		{"MultiAlone", func(c *calls) Store { return multi{c} }, []StreamAppend{aged}, []string{"multi key@no-stream/1h0m0s"}, nil},
		{"MultiPlain", func(c *calls) Store { return multi{c} }, []StreamAppend{plain}, []string{"append order@3"}, nil},
		{"Neither", func(c *calls) Store { return c }, []StreamAppend{plain, aged}, nil, ErrInvalidArgument},
		{"NeitherPlain", func(c *calls) Store { return c }, []StreamAppend{plain}, []string{"append order@3"}, nil},
		{"Negative", func(c *calls) Store { return setter{c} }, []StreamAppend{plain, {Stream: "key", Events: events, MaxAge: -1}},
			nil, ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			made := &calls{}
			_, err := Write(t.Context(), c.store(made), c.appends...)
			if !errors.Is(err, c.err) {
				t.Errorf("Write: %v, want %v", err, c.err)
			}
			if !slices.Equal(made.made, c.want) {
				t.Errorf("calls %q, want %q", made.made, c.want)
			}
		})
	}
}

// revisions is a Store whose one stream, "s", holds events at these revisions; any other
// stream is not found.
type revisions struct {
	calls
	revs []uint64
}

func (r *revisions) ReadStream(_ context.Context, stream string, opts ReadStreamOptions) iter.Seq2[RecordedEvent, error] {
	return func(yield func(RecordedEvent, error) bool) {
		if stream != "s" {
			yield(RecordedEvent{}, ErrStreamNotFound)
			return
		}
		revs := slices.Clone(r.revs)
		if opts.Direction == Backwards {
			slices.Reverse(revs)
		}
		for i, rev := range revs {
			if opts.Limit > 0 && uint64(i) >= opts.Limit || !yield(RecordedEvent{Stream: stream, Revision: rev}, nil) {
				return
			}
		}
	}
}

// First and Last read a stream's first and last events, and tell a stream not found, or one
// that holds none, from a failure.
func TestFirstAndLast(t *testing.T) {
	s := &revisions{revs: []uint64{4, 5, 6}}
	ctx := t.Context()
	first, ok1, err1 := First(ctx, s, "s")
	last, ok2, err2 := Last(ctx, s, "s")
	if first.Revision != 4 || last.Revision != 6 || !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Errorf("First %d %v %v, Last %d %v %v; want 4 and 6, found", first.Revision, ok1, err1, last.Revision, ok2, err2)
	}
	for _, c := range []struct {
		stream string
		store  *revisions
	}{{"missing", s}, {"s", &revisions{}}} {
		if _, ok, err := Last(ctx, c.store, c.stream); ok || err != nil {
			t.Errorf("Last of %s holding %v: found %v, %v; want not found, no error", c.stream, c.store.revs, ok, err)
		}
	}
}
