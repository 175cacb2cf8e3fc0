package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/internal/signal"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
)

// Service runs the deliveries of every enabled endpoint whose lease this node holds, and
// answers the API's questions about them.
type Service struct {
	Store     eventstore.Store
	Feed      eventstore.Feed
	Endpoints *Endpoints
	Config    *Config
	// Node names this process in leases; it must differ between processes.
	Node    string
	Log     *slog.Logger
	Metrics *Metrics // nil counts nothing
	Now     func() time.Time

	client   *http.Client
	attempts chan struct{} // a slot for each attempt in flight on this node (Config.MaxAttempts)
	mu       sync.Mutex
	wakes    map[string]*signal.Signal // by principal: new events of its orders in the log
	pend     map[string]int            // pending deliveries per endpoint delivered here
	tail     tail                      // the order events watch reads, handed to the runners caught up
}

// wakeFor is the signal of new events of principal's orders.
func (s *Service) wakeFor(principal string) *signal.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wakes == nil {
		s.wakes = map[string]*signal.Signal{}
	}
	g, ok := s.wakes[principal]
	if !ok {
		g = &signal.Signal{}
		s.wakes[principal] = g
	}
	return g
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Run delivers until ctx ends: it starts a runner for every enabled endpoint (which waits for
// its lease), and watches the log for new order events and for endpoint changes made on other
// nodes. It returns once every runner has stopped.
func (s *Service) Run(ctx context.Context) error {
	s.client = newClient(s.Config.AllowPrivate, s.Config.Timeout, s.Config.MaxInFlight, s.Config.MaxAttempts)
	s.attempts = make(chan struct{}, s.Config.MaxAttempts)
	head, err := s.Feed.Head(ctx)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	changed := &signal.Signal{}
	var wg sync.WaitGroup
	wg.Go(func() { s.watch(ctx, head, changed) })
	running := map[string]bool{}
	done := make(chan string)
	for {
		if err := s.Endpoints.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("webhook endpoints", "error", err)
		}
		for _, ep := range s.Endpoints.active() {
			if !running[ep.ID] {
				running[ep.ID] = true
				wg.Go(func() { s.newRunner(ep.ID).run(ctx); done <- ep.ID })
			}
		}
		select {
		case <-ctx.Done():
			go func() {
				for range done {
				}
			}()
			wg.Wait()
			close(done)
			return nil
		case id := <-done:
			delete(running, id)
		case <-changed.Wait():
		case <-time.After(time.Second):
		}
	}
}

// watch is the node's one reader of the log, from after: it hands an order event to the runners
// that follow it (the tail) and wakes its principal's runners; an endpoint event (from any node)
// reloads the endpoint and wakes the supervisor.
func (s *Service) watch(ctx context.Context, after eventstore.Position, changed *signal.Signal) {
	filter := eventstore.Filter{StreamPrefixes: []string{command.StreamName(""), endpointPrefix}}
	dropped := func(err error) { s.Log.Warn("webhooks: follow the log", "error", err) }
	err := eventstore.Follow(ctx, s.Feed, eventstore.SubscribeOptions{After: after, Filter: filter}, dropped, func(e eventstore.RecordedEvent) error {
		if id, ok := strings.CutPrefix(e.Stream, endpointPrefix); ok {
			if err := s.Endpoints.Reload(ctx, id); err != nil {
				s.Log.Warn("webhook endpoint", "endpoint", id, "error", err)
			}
			changed.Notify()
			return nil
		}
		if s.Endpoints.none() {
			s.tail.hand(e, "") // no runner to hand it to or wake: its principal is not decoded
			return nil
		}
		principal := command.PrincipalOf(e.Metadata)
		s.tail.hand(e, principal)
		s.wakeFor(principal).Notify()
		return nil
	})
	if ctx.Err() == nil {
		s.Log.Warn("webhooks: the log is no longer followed", "error", err)
	}
}

// checkpoint reads the endpoint's last checkpoint, and the expected revision of the next: from
// its delivery stream, or from the backup that a compaction by copying, before the store could
// truncate, left if it died with the stream deleted.
func (s *Service) checkpoint(ctx context.Context, id string) (Checkpoint, eventstore.ExpectedRevision, bool, error) {
	cp, rev, found, err := s.lastCheckpoint(ctx, deliveryPrefix+id)
	if err != nil || found {
		return cp, eventstore.Exact(rev), found, err
	}
	cp, _, found, err = s.lastCheckpoint(ctx, backupPrefix+id)
	return cp, eventstore.NoStream, found, err
}

func (s *Service) lastCheckpoint(ctx context.Context, stream string) (Checkpoint, uint64, bool, error) {
	e, found, err := eventstore.Last(ctx, s.Store, stream)
	if err != nil || !found {
		return Checkpoint{}, 0, false, err
	}
	var cp Checkpoint
	if err := json.Unmarshal(e.Data, &cp); err != nil {
		return Checkpoint{}, 0, false, fmt.Errorf("checkpoint of %s at %d: %w", stream, e.Revision, err)
	}
	return cp, e.Revision, true, nil
}

// Pending returns the deliveries endpoint id's last checkpoint holds.
func (s *Service) Pending(ctx context.Context, id string) ([]Delivery, error) {
	cp, _, _, err := s.checkpoint(ctx, id)
	return cp.Pending, err
}

func (s *Service) logEndpoint(id, event string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{slog.String("event", event), slog.String("endpoint", id), slog.String("node", s.Node)}, attrs...)
	s.Log.LogAttrs(context.Background(), slog.LevelInfo, "webhook endpoint", attrs...)
}

func (s *Service) setPending(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pend == nil {
		s.pend = map[string]int{}
	}
	if n == 0 {
		delete(s.pend, id)
	} else {
		s.pend[id] = n
	}
}

// PendingTotal is the deliveries waiting, in flight or waiting for a retry on this node.
func (s *Service) PendingTotal() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.pend {
		n += p
	}
	return n
}
