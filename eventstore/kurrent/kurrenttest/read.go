package kurrenttest

import (
	"context"
	"errors"
	"iter"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/acme/orders/eventstore"
	"github.com/dlclark/regexp2"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read implements the Streams service's Read: stream reads, $all reads and $all subscriptions.
func (ss *streamsService) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	opts := req.GetOptions()
	structured := opts.GetUuidOption().GetStructured() != nil
	send := func(ev stored) error {
		return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Event{Event: readEvent(ev, structured)}})
	}
	backwards := opts.GetReadDirection() == streams.ReadReq_Options_Backwards
	_, subscribe := opts.GetCountOption().(*streams.ReadReq_Options_Subscription)
	var err error
	switch so := opts.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		if subscribe {
			return status.Error(codes.Unimplemented, "the test server has no stream subscriptions")
		}
		err = ss.s.readStream(srv, so.Stream, backwards, opts.GetCount(), send)
	case *streams.ReadReq_Options_All:
		var match func(stored) bool
		match, err = filter(opts.GetFilter())
		if err != nil {
			return err
		}
		if subscribe {
			err = ss.s.subscribeAll(srv, so.All, opts.GetFilter(), match, send)
		} else {
			err = ss.s.readAll(srv.Context(), so.All, backwards, opts.GetCount(), match, send)
		}
	default:
		return status.Error(codes.InvalidArgument, "read needs stream or all options")
	}
	if err != nil && status.Code(err) == codes.Unknown {
		if ctxErr := srv.Context().Err(); ctxErr != nil {
			return status.FromContextError(ctxErr).Err()
		}
		return internal(err)
	}
	return err
}

func (s *Server) readStream(srv streams.Streams_ReadServer, so *streams.ReadReq_Options_StreamOptions, backwards bool, count uint64, send func(stored) error) error {
	ctx := srv.Context()
	stream := string(so.GetStreamIdentifier().GetStreamName())
	if err := validStream(stream); err != nil {
		return err
	}
	m, err := s.meta(ctx, stream)
	if err != nil {
		return err
	}
	e := s.entry(stream)
	e.mu.Lock()
	err = s.load(ctx, stream, e)
	last := e.last
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if last < 0 || m.softDeleted() {
		return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(stream)},
		}}})
	}
	// What the metadata keeps: revisions from $tb on, the last $maxCount, and those younger
	// than $maxAge.
	first := uint64(max(m.tb, 0))
	if m.maxCount > 0 && last-m.maxCount+1 > int64(first) {
		first = uint64(last - m.maxCount + 1)
	}
	var oldest time.Time
	if m.maxAge > 0 {
		oldest = time.Now().Add(-time.Duration(m.maxAge) * time.Second)
	}
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Forwards}
	switch r := so.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Revision:
		opts.From = r.Revision
	case *streams.ReadReq_Options_StreamOptions_End:
		opts.From = eventstore.End
		if !backwards {
			return nil
		}
	}
	if backwards {
		opts.Direction = eventstore.Backwards
	} else {
		opts.From = max(opts.From, first)
	}
	sent := uint64(0)
	for rec, err := range s.store.ReadStream(ctx, stream, opts) {
		if err != nil {
			return err
		}
		if sent >= count || rec.Revision < first {
			return nil
		}
		ev, err := decode(rec)
		if err != nil {
			return err
		}
		if !oldest.IsZero() && ev.created.Before(oldest) {
			continue
		}
		if err := send(ev); err != nil {
			return err
		}
		sent++
	}
	return nil
}

func (s *Server) readAll(ctx context.Context, ao *streams.ReadReq_Options_AllOptions, backwards bool, count uint64, match func(stored) bool, send func(stored) error) error {
	var from eventstore.Position
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Position:
		from = eventstore.Position{Commit: p.Position.CommitPosition, Prepare: p.Position.CommitPosition}
	case *streams.ReadReq_Options_AllOptions_End:
		if !backwards {
			return nil
		}
		from = eventstore.Position{Commit: math.MaxInt64, Prepare: math.MaxInt64}
	case *streams.ReadReq_Options_AllOptions_Start:
		if backwards {
			return nil
		}
	}
	var events iter.Seq2[eventstore.RecordedEvent, error]
	if backwards {
		events = s.backwards(ctx, from.Commit)
	} else {
		events = s.store.ReadAll(ctx, eventstore.ReadAllOptions{From: from})
	}
	sent := uint64(0)
	for rec, err := range events {
		if err != nil {
			return err
		}
		if sent >= count {
			return nil
		}
		ev, err := decode(rec)
		if err != nil {
			return err
		}
		if !match(ev) {
			continue
		}
		if err := send(ev); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// backwards yields the log from position from (inclusive) back to the start, a page at a time:
// the embedded store reads the log forwards only.
func (s *Server) backwards(ctx context.Context, from uint64) iter.Seq2[eventstore.RecordedEvent, error] {
	return func(yield func(eventstore.RecordedEvent, error) bool) {
		head, err := s.store.Head(ctx)
		if err != nil {
			yield(eventstore.RecordedEvent{}, err)
			return
		}
		const page = 256
		end := min(from, head.Commit) // inclusive
		for end > 0 {
			start := uint64(1)
			if end > page {
				start = end - page + 1
			}
			var got []eventstore.RecordedEvent
			for rec, err := range s.store.ReadAll(ctx, eventstore.ReadAllOptions{From: eventstore.Position{Commit: start, Prepare: start}, Limit: end - start + 1}) {
				if err != nil {
					yield(eventstore.RecordedEvent{}, err)
					return
				}
				if rec.Position.Commit <= end {
					got = append(got, rec)
				}
			}
			for i := len(got) - 1; i >= 0; i-- {
				if !yield(got[i], nil) {
					return
				}
			}
			end = start - 1
		}
	}
}

// subscribeAll serves a catch-up subscription to $all: the events after the start position,
// then new ones as they commit, until the client goes away or the server stops.
func (s *Server) subscribeAll(srv streams.Streams_ReadServer, ao *streams.ReadReq_Options_AllOptions, fo *streams.ReadReq_Options_FilterOptions, match func(stored) bool, send func(stored) error) error {
	ctx := srv.Context()
	var after eventstore.Position
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Position:
		after = eventstore.Position{Commit: p.Position.CommitPosition, Prepare: p.Position.CommitPosition}
	case *streams.ReadReq_Options_AllOptions_End:
		head, err := s.store.Head(ctx)
		if err != nil {
			return err
		}
		after = head
	}
	if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{Confirmation: &streams.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	// A filtered subscription reports a checkpoint every window × multiplier events it
	// examined, with the position of the last of them, so that a client can resume past long
	// runs of events that the filter drops.
	every := uint64(0)
	if fo != nil {
		window := uint64(fo.GetMax())
		if window == 0 {
			window = 32
		}
		every = window * uint64(max(fo.GetCheckpointIntervalMultiplier(), 1))
	}
	examined := uint64(0)
	for rec, err := range s.store.SubscribeAll(ctx, eventstore.SubscribeOptions{After: after}) {
		if err != nil {
			if errors.Is(err, eventstore.ErrClosed) {
				return status.Error(codes.Unavailable, errStopped.Error())
			}
			return err
		}
		ev, err := decode(rec)
		if err != nil {
			return err
		}
		if match(ev) {
			if err := send(ev); err != nil {
				return err
			}
		}
		if examined++; every > 0 && examined%every == 0 {
			if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
				CommitPosition: ev.position, PreparePosition: ev.position,
			}}}); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// filter compiles a read's filter. KurrentDB matches a prefix with StartsWith and a regular
// expression with .NET's Regex.IsMatch, which regexp2 follows (lookaheads included).
func filter(fo *streams.ReadReq_Options_FilterOptions) (func(stored) bool, error) {
	if fo == nil {
		return func(stored) bool { return true }, nil
	}
	var expr *streams.ReadReq_Options_FilterOptions_Expression
	field := func(ev stored) string { return ev.stream }
	switch f := fo.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		expr = f.StreamIdentifier
	case *streams.ReadReq_Options_FilterOptions_EventType:
		expr = f.EventType
		field = func(ev stored) string { return ev.typ }
	default:
		return nil, status.Error(codes.InvalidArgument, "filter needs a stream identifier or event type expression")
	}
	if prefixes := expr.GetPrefix(); len(prefixes) > 0 {
		return func(ev stored) bool {
			for _, p := range prefixes {
				if strings.HasPrefix(field(ev), p) {
					return true
				}
			}
			return false
		}, nil
	}
	re, err := regexp2.Compile(expr.GetRegex(), regexp2.None)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "filter regex: %v", err)
	}
	return func(ev stored) bool {
		ok, _ := re.MatchString(field(ev))
		return ok
	}, nil
}

func readEvent(ev stored, structured bool) *streams.ReadResp_ReadEvent {
	return &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               toUUID(ev.id, structured),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(ev.stream)},
			StreamRevision:   ev.revision,
			PreparePosition:  ev.position,
			CommitPosition:   ev.position,
			Metadata: map[string]string{
				"type":         ev.typ,
				"content-type": ev.contentType,
				// .NET ticks (100 ns) since the Unix epoch.
				"created": strconv.FormatInt(ev.created.UnixNano()/100, 10),
			},
			CustomMetadata: ev.custom,
			Data:           ev.data,
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: ev.position},
	}
}
