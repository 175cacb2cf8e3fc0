package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/lease"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes every event of the orders' streams to JetStream, on <Prefix>.<order id>,
// in log order, with Nats-Msg-Id the event's id. One node publishes at a time: the one whose
// checkpoint holds the lease (package lease). It follows the log from its checkpoint, publishes
// a batch and waits for JetStream to acknowledge all of it; then, once caught up with the log or
// when the lease is due for renewal, it appends the checkpoint past it at the revision it last
// wrote, which renews the lease; an append refused means another node took over. A node
// stopped after an acknowledgement and before its checkpoint has its successor publish those
// events again (a batch when it kept up, at most a third of the lease's worth while it caught
// up): at least once, stored once by JetStream within its duplicate window.
type Publisher struct {
	JS      jetstream.JetStream
	Store   eventstore.Store
	Feed    eventstore.Feed
	Prefix  string // of the subjects
	Stream  string // the JetStream stream of the subjects
	Streams Streams
	Batch   int // events published and not yet acknowledged, at most
	Lease   lease.Terms
	Metrics *Metrics
	Log     *slog.Logger

	cp       checkpoint
	held     lease.Held // on the checkpoint stream
	headRead time.Time
}

// checkpoint is the publisher's event in its checkpoint stream: the log position published up
// to, and the node that holds the lease.
type checkpoint struct {
	Node    string    `json:"node"`
	Commit  uint64    `json:"commit"`
	Prepare uint64    `json:"prepare"`
	At      time.Time `json:"at"`
}

func (c checkpoint) position() eventstore.Position {
	return eventstore.Position{Commit: c.Commit, Prepare: c.Prepare}
}

// TypeCheckpoint is the type of the publisher's checkpoint events.
const TypeCheckpoint = "nats-publisher.checkpoint.v1"

// CheckpointStream is the checkpoint stream of the publisher to JetStream stream name.
func CheckpointStream(name string) string { return "natspublisher-" + name }

// ackTimeout bounds the wait for JetStream's acknowledgements of a batch.
const ackTimeout = 10 * time.Second

// Run publishes while ctx lasts, taking the lease whenever it is free.
func (p *Publisher) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if !p.acquire(ctx) {
			return
		}
		p.Log.Info("nats publisher lease acquired", "node", p.Lease.Node, "position", p.cp.position().String())
		err := p.publish(ctx)
		if ctx.Err() == nil {
			p.Log.Warn("nats publisher stopped; taking the lease again", "error", err)
			sleep(ctx, time.Second)
		}
	}
}

// acquire takes the publisher's lease (lease.Terms.Acquire) with a checkpoint at the last one's
// position.
func (p *Publisher) acquire(ctx context.Context) bool {
	var cp checkpoint
	var expected eventstore.ExpectedRevision
	return p.Lease.Acquire(ctx, func(ctx context.Context) lease.Look {
		var found bool
		var err error
		if cp, expected, found, err = p.last(ctx); err != nil {
			p.Log.Warn("nats publisher lease", "error", err)
			return lease.Look{Failed: true}
		}
		rev, _ := expected.Revision()
		return lease.Look{Holder: cp.Node, Revision: rev, Found: found}
	}, func(ctx context.Context) error {
		p.cp, p.held.Store, p.held.Stream, p.held.Expected = cp, p.Store, CheckpointStream(p.Stream), expected
		p.cp.Node = p.Lease.Node
		return p.save(ctx)
	})
}

// last reads the last checkpoint and the revision to append the next at.
func (p *Publisher) last(ctx context.Context) (checkpoint, eventstore.ExpectedRevision, bool, error) {
	e, found, err := eventstore.Last(ctx, p.Store, CheckpointStream(p.Stream))
	if err != nil || !found {
		return checkpoint{}, eventstore.NoStream, false, err
	}
	var cp checkpoint
	if err := json.Unmarshal(e.Data, &cp); err != nil {
		return checkpoint{}, eventstore.Any, false, fmt.Errorf("the publisher's checkpoint at %d: %w", e.Revision, err)
	}
	return cp, eventstore.Exact(e.Revision), true, nil
}

// save appends the checkpoint, which renews the lease (lease.Held).
func (p *Publisher) save(ctx context.Context) error {
	p.cp.At = time.Now().UTC()
	data, _ := json.Marshal(p.cp)
	ev := eventstore.EventData{ID: uuid.Must(uuid.NewV7()), Type: TypeCheckpoint, Data: data}
	if _, err := p.held.Renew(ctx, ev); err != nil {
		return err
	}
	if time.Since(p.headRead) >= time.Second {
		p.headRead = time.Now()
		if head, err := p.Feed.Head(ctx); err == nil && head.Commit >= p.cp.Commit {
			p.Metrics.lagEvents.Set(float64(head.Commit - p.cp.Commit))
		}
	}
	return nil
}

// publish follows the log after the checkpoint and publishes it in batches until the lease is
// lost or ctx ends; it renews the lease a third of its length after the last checkpoint.
func (p *Publisher) publish(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan eventstore.RecordedEvent, p.Batch)
	followed := make(chan error, 1)
	opts := eventstore.SubscribeOptions{After: p.cp.position(), Filter: eventstore.Filter{StreamPrefixes: []string{command.StreamName("")}}}
	go func() {
		followed <- eventstore.Follow(ctx, p.Feed, opts, func(err error) { p.Log.Warn("nats publisher: the log's subscription dropped", "error", err) },
			func(e eventstore.RecordedEvent) error {
				select {
				case events <- e:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
	}()
	for {
		batch, err := p.next(ctx, events, followed)
		if err != nil {
			return err
		}
		if err := p.sendAll(ctx, batch); err != nil {
			return err
		}
		// Behind the log (a full batch), the checkpoint waits for the lease's renewal: an
		// append to the store a batch, queued behind the commands' appends, held the publisher
		// under their rate. Caught up, it follows every batch.
		if len(batch) == p.Batch && p.held.RenewIn(p.Lease.Length) > 0 {
			continue
		}
		if err := p.save(ctx); err != nil {
			return err
		}
	}
}

// next waits for the next events, up to Batch of them, or for the time to renew the lease
// (an empty batch).
func (p *Publisher) next(ctx context.Context, events <-chan eventstore.RecordedEvent, followed <-chan error) ([]eventstore.RecordedEvent, error) {
	renew := time.NewTimer(max(p.held.RenewIn(p.Lease.Length), time.Millisecond))
	defer renew.Stop()
	var batch []eventstore.RecordedEvent
	select {
	case e := <-events:
		batch = append(batch, e)
	case err := <-followed:
		return nil, err
	case <-renew.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for len(batch) < p.Batch {
		select {
		case e := <-events:
			batch = append(batch, e)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// sendAll publishes batch until JetStream acknowledges all of it, renewing the lease between
// tries; it moves the checkpoint past the batch.
func (p *Publisher) sendAll(ctx context.Context, batch []eventstore.RecordedEvent) error {
	if len(batch) == 0 {
		return nil
	}
	for {
		if p.held.RenewIn(p.Lease.Length) <= 0 {
			if err := p.save(ctx); err != nil {
				return err
			}
		}
		err := p.send(ctx, batch)
		if err == nil {
			last := batch[len(batch)-1].Position
			p.cp.Commit, p.cp.Prepare = last.Commit, last.Prepare
			return nil
		}
		p.Metrics.publishErrors.Inc()
		p.Log.Warn("nats publish; trying again", "events", len(batch), "error", err)
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// send publishes batch and waits for JetStream's acknowledgement of each event.
func (p *Publisher) send(ctx context.Context, batch []eventstore.RecordedEvent) error {
	acks := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, e := range batch {
		f, err := p.JS.PublishMsgAsync(p.message(e), jetstream.WithMsgID(e.ID.String()), jetstream.WithExpectStream(p.Stream))
		if err != nil {
			return err
		}
		acks = append(acks, f)
	}
	timeout := time.NewTimer(ackTimeout)
	defer timeout.Stop()
	for i, f := range acks {
		select {
		case <-f.Ok():
			p.Metrics.published.Inc()
			p.Metrics.lagSeconds.Observe(time.Since(batch[i].Recorded).Seconds())
		case err := <-f.Err():
			return err
		case <-timeout.C:
			return fmt.Errorf("no acknowledgement from JetStream within %v", ackTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Headers of the published events.
const (
	EventType      = "Event-Type"
	StreamRevision = "Stream-Revision"
	LogPosition    = "Log-Position"
	Principal      = "Principal"
)

// message is event e as published.
func (p *Publisher) message(e eventstore.RecordedEvent) *nats.Msg {
	h := nats.Header{
		EventType:      {e.Type},
		StreamRevision: {strconv.FormatUint(e.Revision, 10)},
		LogPosition:    {strconv.FormatUint(e.Position.Commit, 10)},
		"Content-Type": {"application/json"},
	}
	if principal := command.PrincipalOf(e.Metadata); principal != "" {
		h.Set(Principal, principal)
	}
	subject := p.Prefix + "." + strings.TrimPrefix(e.Stream, command.StreamName(""))
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data}
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
