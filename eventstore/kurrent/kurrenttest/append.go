package kurrenttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/acme/orders/eventstore"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// KurrentDB's expected versions, as its server code spells them.
const (
	expectAny          int64 = -2
	expectNoStream     int64 = -1
	expectStreamExists int64 = -4
)

// deletedStream is the $tb that marks a soft-deleted stream (EventNumber.DeletedStream).
const deletedStream int64 = math.MaxInt64

// entry is what the server knows of one stream. Writers of the stream hold mu for the whole
// write; a soft delete or recreation also takes the metadata stream's entry, always after the
// stream's own, and writers of a metadata stream take nothing else, so locks never cycle.
type entry struct {
	mu       sync.Mutex
	loaded   bool
	last     int64  // revision of the last event, -1 for none
	lastData []byte // the last event's data: for a metadata stream, the stream's metadata
}

func (s *Server) entry(stream string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.streams[stream]
	if e == nil {
		e = &entry{}
		s.streams[stream] = e
	}
	return e
}

// load reads the stream's last event from storage the first time; the caller holds e.mu.
func (s *Server) load(ctx context.Context, stream string, e *entry) error {
	if e.loaded {
		return nil
	}
	e.last, e.lastData = -1, nil
	opts := eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}
	for rec, err := range s.store.ReadStream(ctx, stream, opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return err
		}
		ev, err := decode(rec)
		if err != nil {
			return err
		}
		e.last, e.lastData = int64(rec.Revision), ev.data
	}
	e.loaded = true
	return nil
}

func metaStream(stream string) string { return "$$" + stream }

func isMetaStream(stream string) bool { return strings.HasPrefix(stream, "$$") }

// streamMeta is a stream's metadata, the last event of its metadata stream.
type streamMeta struct {
	raw      map[string]json.RawMessage
	version  int64 // revision of the metadata event, -1 for none
	tb       int64 // truncate before; 0 when unset
	maxAge   int64 // seconds; 0 when unset
	maxCount int64 // 0 when unset
}

func (m streamMeta) softDeleted() bool { return m.tb == deletedStream }

// meta returns the stream's metadata. A metadata stream has none of its own but keeps one
// event, as in KurrentDB: reading it from the start yields the current metadata.
func (s *Server) meta(ctx context.Context, stream string) (streamMeta, error) {
	m := streamMeta{version: -1}
	if isMetaStream(stream) {
		m.maxCount = 1
		return m, nil
	}
	e := s.entry(metaStream(stream))
	e.mu.Lock()
	err := s.load(ctx, metaStream(stream), e)
	data, version := e.lastData, e.last
	e.mu.Unlock()
	if err != nil {
		return m, err
	}
	m.version = version
	if version < 0 || json.Unmarshal(data, &m.raw) != nil {
		return m, nil // like KurrentDB, metadata that is not a JSON object counts as none
	}
	num := func(key string) int64 {
		n, _ := strconv.ParseInt(string(m.raw[key]), 10, 64)
		return n
	}
	m.tb, m.maxAge, m.maxCount = num("$tb"), num("$maxAge"), num("$maxCount")
	return m, nil
}

// setMeta writes the stream's metadata with key set to value, keeping the other keys, as
// KurrentDB does when it soft-deletes or recreates a stream. It returns the position written.
func (s *Server) setMeta(ctx context.Context, stream, key string, value int64) (uint64, error) {
	name := metaStream(stream)
	e := s.entry(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.load(ctx, name, e); err != nil {
		return 0, err
	}
	raw := map[string]json.RawMessage{}
	if e.last >= 0 {
		json.Unmarshal(e.lastData, &raw)
	}
	raw[key] = json.RawMessage(strconv.FormatInt(value, 10))
	data, err := json.Marshal(raw)
	if err != nil {
		return 0, err
	}
	ev := proposed{id: uuid.New(), typ: "$metadata", contentType: "application/json", data: data}
	res, err := s.commit(ctx, name, e, ev)
	return res.position, err
}

// proposed is an event to write.
type proposed struct {
	id          uuid.UUID
	typ         string
	contentType string
	data        []byte
	custom      []byte
}

// decision is the outcome of KurrentDB's expected-version check.
type decision int

const (
	decisionOK decision = iota
	decisionIdempotent
	decisionWrongVersion // also KurrentDB's CorruptedIdempotency: a partial repeat
	decisionDeleted
)

type outcome struct {
	decision decision
	current  int64  // the stream's last revision when checked, -1 for none
	last     int64  // revision of the last event written, or matched by a repeat
	position uint64 // of that event
}

// check is KurrentDB's expected-version check (IndexCommitter.CheckCommit). The caller holds
// the stream's entry lock.
func (s *Server) check(ctx context.Context, stream string, cur int64, m streamMeta, expected int64, ids []uuid.UUID) (outcome, error) {
	out := outcome{current: cur}
	wrong := func() (outcome, error) { out.decision = decisionWrongVersion; return out, nil }
	if expected == expectStreamExists {
		if m.softDeleted() {
			out.decision = decisionDeleted
			return out, nil
		}
		if cur < 0 && m.version < 0 {
			return wrong()
		}
	}
	if expected == expectAny || expected == expectStreamExists {
		// A repeat is recognised by the ids in the cache of recent ones, in this stream.
		end := int64(-1)
		s.mu.Lock()
		for i, id := range ids {
			ref, ok := s.ids.get(id)
			if !ok || ref.stream != stream {
				s.mu.Unlock()
				if i == 0 {
					return out, nil
				}
				return wrong()
			}
			end = ref.revision
		}
		s.mu.Unlock()
		if end < 0 {
			return out, nil
		}
		return s.idempotent(ctx, stream, out, end)
	}
	if expected < cur {
		// A repeat with an exact expected version finds its ids right after it.
		stored, err := s.idsFrom(ctx, stream, expected+1, len(ids))
		if err != nil {
			return out, err
		}
		for i, id := range ids {
			if i < len(stored) && stored[i] == id {
				continue
			}
			if i > 0 {
				return wrong()
			}
			if expected == expectNoStream && m.softDeleted() {
				return out, nil
			}
			return wrong()
		}
		return s.idempotent(ctx, stream, out, expected+int64(len(ids)))
	}
	if expected > cur {
		return wrong()
	}
	return out, nil
}

// idempotent completes out for a repeat whose last event is at revision end.
func (s *Server) idempotent(ctx context.Context, stream string, out outcome, end int64) (outcome, error) {
	out.decision, out.last = decisionIdempotent, end
	for rec, err := range s.store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{From: uint64(end), Limit: 1}) {
		if err != nil {
			return out, err
		}
		out.position = rec.Position.Commit
	}
	return out, nil
}

// idsFrom returns the ids of up to n events of the stream from revision from, whatever the
// stream's metadata hides.
func (s *Server) idsFrom(ctx context.Context, stream string, from int64, n int) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	for rec, err := range s.store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{From: uint64(from), Limit: uint64(n)}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		ev, err := decode(rec)
		if err != nil {
			return nil, err
		}
		ids = append(ids, ev.id)
	}
	return ids, nil
}

// write appends events to the stream at the expected version, as KurrentDB does.
func (s *Server) write(ctx context.Context, stream string, expected int64, events []proposed) (outcome, error) {
	e := s.entry(stream)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.load(ctx, stream, e); err != nil {
		return outcome{}, err
	}
	m, err := s.meta(ctx, stream)
	if err != nil {
		return outcome{}, err
	}
	ids := make([]uuid.UUID, len(events))
	for i, ev := range events {
		ids[i] = ev.id
	}
	out, err := s.check(ctx, stream, e.last, m, expected, ids)
	if err != nil || out.decision != decisionOK {
		return out, err
	}
	if len(events) == 0 {
		out.last = e.last
		return out, nil
	}
	res, err := s.commit(ctx, stream, e, events...)
	if err != nil {
		return outcome{}, err
	}
	out.last, out.position = res.last, res.position
	if m.softDeleted() {
		// Appending to a soft-deleted stream recreates it from the first new revision.
		if _, err := s.setMeta(ctx, stream, "$tb", out.current+1); err != nil {
			return outcome{}, err
		}
	}
	return out, nil
}

// softDelete deletes the stream at the expected version, as KurrentDB's soft delete does: its
// metadata gets $tb = MaxInt64.
func (s *Server) softDelete(ctx context.Context, stream string, expected int64) (outcome, error) {
	e := s.entry(stream)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := s.load(ctx, stream, e); err != nil {
		return outcome{}, err
	}
	m, err := s.meta(ctx, stream)
	if err != nil {
		return outcome{}, err
	}
	out, err := s.check(ctx, stream, e.last, m, expected, []uuid.UUID{uuid.New()})
	if err != nil || out.decision != decisionOK {
		return out, err
	}
	out.position, err = s.setMeta(ctx, stream, "$tb", deletedStream)
	return out, err
}

type committed struct {
	last     int64
	position uint64
}

// commit stores events after the stream's last revision; the caller holds e.mu and has loaded
// it. The write goes on if the client goes away: a server does not take back an accepted write.
func (s *Server) commit(ctx context.Context, stream string, e *entry, events ...proposed) (committed, error) {
	expected := eventstore.NoStream
	if e.last >= 0 {
		expected = eventstore.Exact(uint64(e.last))
	}
	stored := make([]eventstore.EventData, len(events))
	for i, ev := range events {
		stored[i] = encode(ev)
	}
	res, err := s.store.Append(context.WithoutCancel(ctx), stream, expected, stored...)
	if err != nil {
		e.loaded = false // read the stream again next time
		return committed{}, err
	}
	first := e.last + 1
	e.last, e.lastData = int64(res.Revision), events[len(events)-1].data
	s.mu.Lock()
	for i, ev := range events {
		s.ids.put(ev.id, eventRef{stream: stream, revision: first + int64(i)})
	}
	s.mu.Unlock()
	return committed{last: e.last, position: res.Position.Commit}, nil
}

// Append implements the Streams service's Append.
func (ss *streamsService) Append(srv streams.Streams_AppendServer) error {
	ctx := srv.Context()
	req, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "the first message of an append must be its options")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	var expected int64
	switch r := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		expected = int64(r.Revision)
	case *streams.AppendReq_Options_NoStream:
		expected = expectNoStream
	case *streams.AppendReq_Options_StreamExists:
		expected = expectStreamExists
	default:
		expected = expectAny
	}
	var events []proposed
	size := 0
	for {
		req, err := srv.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		msg := req.GetProposedMessage()
		if msg == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		ev, err := fromProposed(msg)
		if err != nil {
			return err
		}
		if size += len(ev.data) + len(ev.custom) + len(ev.typ); size > ss.s.maxSize {
			grpc.SetTrailer(ctx, metadata.Pairs("exception", "maximum-append-size-exceeded", "maximum-append-size", strconv.Itoa(ss.s.maxSize)))
			return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", ss.s.maxSize)
		}
		events = append(events, ev)
	}
	if err := validStream(stream); err != nil {
		return err
	}
	out, err := ss.s.write(ctx, stream, expected, events)
	if err != nil {
		return internal(err)
	}
	switch out.decision {
	case decisionDeleted:
		return streamDeleted(ctx, stream)
	case decisionWrongVersion:
		return srv.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{
			WrongExpectedVersion: wrongExpectedVersion(out.current, expected),
		}})
	}
	success := &streams.AppendResp_Success{}
	if out.last < 0 {
		success.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
	} else {
		success.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(out.last)}
	}
	if out.position > 0 {
		success.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: out.position, PreparePosition: out.position,
		}}
	} else {
		success.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	}
	return srv.SendAndClose(&streams.AppendResp{Result: &streams.AppendResp_Success_{Success: success}})
}

// Delete implements the Streams service's Delete: a soft delete.
func (ss *streamsService) Delete(ctx context.Context, req *streams.DeleteReq) (*streams.DeleteResp, error) {
	opts := req.GetOptions()
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if err := validStream(stream); err != nil {
		return nil, err
	}
	var expected int64
	switch r := opts.GetExpectedStreamRevision().(type) {
	case *streams.DeleteReq_Options_Revision:
		expected = int64(r.Revision)
	case *streams.DeleteReq_Options_NoStream:
		expected = expectNoStream
	case *streams.DeleteReq_Options_StreamExists:
		expected = expectStreamExists
	default:
		expected = expectAny
	}
	out, err := ss.s.softDelete(ctx, stream, expected)
	if err != nil {
		return nil, internal(err)
	}
	switch out.decision {
	case decisionDeleted:
		return nil, streamDeleted(ctx, stream)
	case decisionWrongVersion:
		// KurrentDB answers a delete's wrong expected version with an exception, not a result.
		actual := ""
		if out.current >= 0 {
			actual = strconv.FormatInt(out.current, 10)
		}
		grpc.SetTrailer(ctx, metadata.Pairs(
			"exception", "wrong-expected-version",
			"stream-name", stream,
			"expected-version", strconv.FormatInt(expected, 10),
			"actual-version", actual,
		))
		return nil, status.Errorf(codes.FailedPrecondition,
			"Delete failed due to WrongExpectedVersion. Stream: %s, Expected version: %d, Actual version: %s", stream, expected, actual)
	}
	return &streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{Position: &streams.DeleteResp_Position{
		CommitPosition: out.position, PreparePosition: out.position,
	}}}, nil
}

func wrongExpectedVersion(current, expected int64) *streams.AppendResp_WrongExpectedVersion {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if current < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(current)}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: uint64(current)}
	}
	switch expected {
	case expectAny:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	case expectNoStream:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case expectStreamExists:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: uint64(expected)}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: uint64(expected)}
	}
	return w
}

// streamDeleted is KurrentDB's StreamDeleted exception.
func streamDeleted(ctx context.Context, stream string) error {
	grpc.SetTrailer(ctx, metadata.Pairs("exception", "stream-deleted", "stream-name", stream))
	return status.Errorf(codes.FailedPrecondition, "Event stream '%s' is deleted.", stream)
}

func validStream(stream string) error {
	if stream == "" {
		return status.Error(codes.InvalidArgument, "stream name is empty")
	}
	return nil
}

func internal(err error) error {
	if errors.Is(err, eventstore.ErrClosed) {
		err = errStopped
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("test server: %v", err))
}

func fromProposed(msg *streams.AppendReq_ProposedMessage) (proposed, error) {
	id, err := fromUUID(msg.GetId())
	if err != nil {
		return proposed{}, err
	}
	typ := msg.GetMetadata()["type"]
	if typ == "" {
		return proposed{}, status.Error(codes.InvalidArgument, "event type is empty")
	}
	return proposed{
		id:          id,
		typ:         typ,
		contentType: msg.GetMetadata()["content-type"],
		data:        msg.GetData(),
		custom:      msg.GetCustomMetadata(),
	}, nil
}

func fromUUID(u *shared.UUID) (uuid.UUID, error) {
	if st := u.GetStructured(); st != nil {
		var id uuid.UUID
		for i := range 8 {
			id[i] = byte(uint64(st.MostSignificantBits) >> (56 - 8*i))
			id[8+i] = byte(uint64(st.LeastSignificantBits) >> (56 - 8*i))
		}
		return id, nil
	}
	id, err := uuid.Parse(u.GetString_())
	if err != nil {
		return uuid.Nil, status.Errorf(codes.InvalidArgument, "event id: %v", err)
	}
	return id, nil
}

func toUUID(id uuid.UUID, structured bool) *shared.UUID {
	if !structured {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id.String()}}
	}
	var most, least uint64
	for i := range 8 {
		most = most<<8 | uint64(id[i])
		least = least<<8 | uint64(id[8+i])
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits: int64(most), LeastSignificantBits: int64(least),
	}}}
}
