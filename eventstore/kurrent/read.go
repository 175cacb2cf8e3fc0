package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/acme/orders/eventstore"
)

// noLimit is the count of an unlimited read: KurrentDB takes counts as signed 64-bit numbers.
const noLimit = math.MaxInt64

// ReadStream implements eventstore.Store. The events stream from the server as the caller
// takes them; nothing holds the whole stream.
func (s *Store) ReadStream(ctx context.Context, stream string, opts eventstore.ReadStreamOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		if err := eventstore.ValidateStream(stream); err != nil {
			yield(eventstore.RecordedEvent{}, err)
			return
		}
		fail := func(err error) { yield(eventstore.RecordedEvent{}, fmt.Errorf("read %s: %w", stream, err)) }
		c, ctx, release, err := s.acquire(ctx)
		if err != nil {
			fail(err)
			return
		}
		defer release()
		read := esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(opts.From)}
		whole := opts.From == 0 // a read that would see the stream's first event
		if opts.Direction == eventstore.Backwards {
			read.Direction = esdb.Backwards
			whole = opts.From == eventstore.End
			if whole {
				read.From = esdb.End{}
			}
		}
		count := uint64(noLimit)
		if opts.Limit > 0 {
			count = min(opts.Limit, noLimit)
		}
		rs, err := c.ReadStream(ctx, stream, read, count)
		if err := s.translate(ctx, c, err); err != nil {
			fail(err)
			return
		}
		defer rs.Close()
		n := 0
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err := s.translate(ctx, c, err); err != nil {
				fail(err)
				return
			}
			n++
			if !yield(recorded(ev), nil) {
				return
			}
		}
		if n == 0 && whole {
			// The stream exists for KurrentDB but shows no event: all are past $maxAge,
			// $maxCount or $tb. For the contract that is a stream that is gone.
			fail(eventstore.ErrStreamNotFound)
		}
	}
}

// ReadAll implements eventstore.Feed. System streams (names starting with "$": metadata,
// statistics, projections) are never yielded. The client cannot filter a read of $all on the
// server, so the filter is applied here while the events stream past.
func (s *Store) ReadAll(ctx context.Context, opts eventstore.ReadAllOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		fail := func(err error) { yield(eventstore.RecordedEvent{}, fmt.Errorf("read all from %v: %w", opts.From, err)) }
		c, ctx, release, err := s.acquire(ctx)
		if err != nil {
			fail(err)
			return
		}
		defer release()
		var from esdb.AllPosition = esdb.Start{}
		if opts.From != eventstore.Start {
			from = esdb.Position{Commit: opts.From.Commit, Prepare: opts.From.Prepare}
		}
		rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: from}, noLimit)
		if err := s.translate(ctx, c, err); err != nil {
			fail(err)
			return
		}
		defer rs.Close()
		left := opts.Limit
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err := s.translate(ctx, c, err); err != nil {
				fail(err)
				return
			}
			e := recorded(ev)
			if !selects(opts.Filter, e.Stream) {
				continue
			}
			if !yield(e, nil) {
				return
			}
			if left > 0 {
				if left--; left == 0 {
					return
				}
			}
		}
	}
}

// Head implements eventstore.Feed: the position of the last event of $all outside the system
// streams.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return eventstore.Position{}, fmt.Errorf("head: %w", err)
	}
	defer release()
	rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, noLimit)
	if err := s.translate(ctx, c, err); err != nil {
		return eventstore.Position{}, fmt.Errorf("head: %w", err)
	}
	defer rs.Close()
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return eventstore.Start, nil
		}
		if err := s.translate(ctx, c, err); err != nil {
			return eventstore.Position{}, fmt.Errorf("head: %w", err)
		}
		if e := recorded(ev); !system(e.Stream) {
			return e.Position, nil
		}
	}
}

// Ping implements eventstore.Store: the server answers a read of the log's head.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.Head(ctx)
	return err
}

// Reconnection backoff of a subscription whose connection dropped.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// SubscribeAll implements eventstore.Feed with a catch-up subscription to $all, filtered on the
// server by a regular expression on stream names (system streams excluded, then the filter's
// prefixes). When the connection drops it subscribes again, with backoff, after the last event
// it yielded.
//
// It resumes only from positions of events it received, never from the checkpoints a filtered
// subscription sends: KurrentDB issue #4970 reports a checkpoint whose commit position is past
// the last event and is then taken by the next event written, which a subscription resumed from
// that checkpoint would skip. Events at or before the resume position are dropped, so a server
// that repeats one across a reconnection does not yield it twice.
func (s *Store) SubscribeAll(ctx context.Context, opts eventstore.SubscribeOptions) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		after := opts.After
		fail := func(err error) {
			yield(eventstore.RecordedEvent{}, fmt.Errorf("subscribe to all after %v: %w", after, err))
		}
		filter := &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Regex: streamRegex(opts.Filter)}
		backoff := minBackoff
		for {
			err := s.subscribeOnce(ctx, &after, filter, opts.Filter, yield, func() { backoff = minBackoff })
			if err == nil {
				return // the caller stopped
			}
			if !errors.Is(err, eventstore.ErrUnavailable) {
				fail(err)
				return
			}
			// The connection dropped or the server is away: try again after a while.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				fail(ctx.Err())
				return
			case <-s.ctx.Done():
				t.Stop()
				fail(eventstore.ErrClosed)
				return
			}
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// subscribeOnce runs one subscription from *after until it fails (the error) or the caller
// stops (nil), moving *after past every event received.
func (s *Store) subscribeOnce(ctx context.Context, after *eventstore.Position, filter *esdb.SubscriptionFilter, f eventstore.Filter,
	yield func(eventstore.RecordedEvent, error) bool, received func()) error {
	c, ctx, release, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	var from esdb.AllPosition = esdb.Start{}
	if *after != eventstore.Start {
		from = esdb.Position{Commit: after.Commit, Prepare: after.Prepare}
	}
	sub, err := c.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: from, Filter: filter})
	if err := s.translate(ctx, c, err); err != nil {
		return err
	}
	defer sub.Close()
	for {
		msg := sub.Recv()
		switch {
		case msg.SubscriptionDropped != nil:
			return s.translate(ctx, c, msg.SubscriptionDropped.Error)
		case msg.EventAppeared != nil:
			e := recorded(msg.EventAppeared)
			if e.Position.Compare(*after) <= 0 {
				continue
			}
			*after = e.Position
			received()
			if selects(f, e.Stream) && !yield(e, nil) {
				return nil
			}
		}
	}
}

// system reports whether a stream is one of KurrentDB's own: metadata ("$$…"), statistics,
// projections, scavenges and the like.
func system(stream string) bool { return strings.HasPrefix(stream, "$") }

// selects reports whether the backend yields events of stream: not a system stream, and
// selected by the filter. The server filters too; this makes the contract hold whatever the
// server's regular expression engine does.
func selects(f eventstore.Filter, stream string) bool { return !system(stream) && f.Match(stream) }

// streamRegex is the server-side form of a filter: a .NET regular expression on stream names
// that refuses system streams and the excluded prefixes (negative lookaheads) and then wants one
// of the prefixes. KurrentDB's prefix filter has no exclusion, hence the expression.
func streamRegex(f eventstore.Filter) string {
	alt := func(prefixes []string) string {
		quoted := make([]string, len(prefixes))
		for i, p := range prefixes {
			quoted[i] = regexp.QuoteMeta(p)
		}
		return "(?:" + strings.Join(quoted, "|") + ")"
	}
	re := `^(?!\$)`
	if len(f.ExcludeStreamPrefixes) > 0 {
		re += "(?!" + alt(f.ExcludeStreamPrefixes) + ")"
	}
	if len(f.StreamPrefixes) > 0 {
		re += alt(f.StreamPrefixes)
	}
	return re
}

func recorded(ev *esdb.ResolvedEvent) eventstore.RecordedEvent {
	e := ev.OriginalEvent()
	return eventstore.RecordedEvent{
		ID:       e.EventID,
		Stream:   e.StreamID,
		Revision: e.EventNumber,
		Position: eventstore.Position{Commit: e.Position.Commit, Prepare: e.Position.Prepare},
		Type:     e.EventType,
		Data:     e.Data,
		Metadata: e.UserMetadata,
		Recorded: e.CreatedDate,
	}
}
