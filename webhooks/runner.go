package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/lease"
)

// runner delivers for one endpoint while its node holds the endpoint's lease. Its state is the
// checkpoint it last appended, changed in memory since (dirty); it appends it again at the exact
// revision it knows, so an append refused means another node took the lease over.
type runner struct {
	s        *Service
	id       string
	held     lease.Held // on the endpoint's delivery stream
	cp       Checkpoint
	dirty    bool
	lost     bool      // another node holds the lease
	behind   bool      // the log may hold events after the cursor
	follow   *follower // the runner's place in the node's shared reader; nil: it reads on its own
	sending  map[string]bool
	starved  bool // due deliveries wait for room on the node (Config.MaxAttempts)
	results  chan result
	deadPoll time.Time
	// deadAdded: a dead letter was appended since the dead-letter stream's length was checked.
	deadAdded bool

	mu     sync.Mutex
	states map[string]order.State // the state of an order after its latest event built
}

type result struct {
	id string
	a  Attempt
}

// maxScan bounds the log events one fill reads, so that a runner whose client has no events
// among many others still answers its results and renews its lease.
const maxScan = 4096

// saveEvery is the least time between two checkpoints of a runner: under load a checkpoint
// then records many deliveries at once. A crash re-sends what was pending at the last one.
const saveEvery = 20 * time.Millisecond

// idlePoll is how often an idle runner on a single node reads the log anyway; new events of
// its principal's orders wake it at once.
const idlePoll = 5 * time.Second

// starvedPoll is how often a runner whose due deliveries found no room on the node looks again.
const starvedPoll = 50 * time.Millisecond

// maxStates bounds the orders whose state a runner keeps, to build the next delivery's body
// without folding the order again.
const maxStates = 256

func (s *Service) newRunner(id string) *runner {
	return &runner{s: s, id: id, held: lease.Held{Store: s.Store, Stream: deliveryPrefix + id}, behind: true, sending: map[string]bool{},
		results: make(chan result, s.Config.MaxInFlight), states: map[string]order.State{}}
}

// run delivers until ctx ends, the endpoint is no longer enabled, or the lease is lost.
func (r *runner) run(ctx context.Context) {
	if !r.acquire(ctx) {
		return
	}
	r.s.logEndpoint(r.id, "lease acquired", slog.String("cursor", r.cp.Cursor.String()), slog.Int("pending", len(r.cp.Pending)))
	defer r.stop(ctx)
	defer r.leaveTail()
	for {
		ep, err := r.s.Endpoints.Get(r.id, "", true)
		if err != nil || ep.Status != StatusEnabled || r.lost || ctx.Err() != nil {
			return
		}
		// Taken before the step reads the log: an event committed after the read closes it.
		wake := r.s.wakeFor(ep.Principal).Wait()
		now := r.s.now()
		if err := r.step(ctx, ep, now); err != nil {
			r.s.Log.Warn("webhook deliveries", "endpoint", r.id, "error", err)
		}
		if r.lost {
			return
		}
		timer := time.NewTimer(r.nextDue(now))
		select {
		case <-ctx.Done():
		case res := <-r.results:
			r.finish(ctx, ep, res)
		case <-wake:
			r.behind = true
		case <-timer.C:
			r.behind = true // the log is read at least every idlePoll, whatever woke the runner
		}
		timer.Stop()
	}
}

func (r *runner) leaveTail() {
	if r.follow != nil {
		r.s.tail.leave(r.follow)
		r.follow = nil
	}
}

// step reads new events, starts the attempts that are due, and saves the checkpoint if it
// changed or its lease needs renewing.
func (r *runner) step(ctx context.Context, ep Endpoint, now time.Time) error {
	for len(r.results) > 0 {
		r.finish(ctx, ep, <-r.results)
	}
	if err := r.fill(ctx, ep, now); err != nil {
		return err
	}
	if err := r.pollRetries(ctx, now); err != nil {
		return err
	}
	if r.deadAdded {
		r.deadAdded = false
		if err := r.boundDeadLetters(ctx, now); err != nil {
			return err
		}
	}
	renew := !r.s.Config.SingleNode && r.held.RenewIn(r.s.Config.Lease) <= 0
	if (r.dirty && now.Sub(r.cp.At) >= saveEvery) || renew {
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	r.start(ctx, ep, r.s.now())
	r.s.setPending(r.id, len(r.cp.Pending))
	return nil
}

// nextDue is how long to wait before the next step when nothing wakes the runner.
func (r *runner) nextDue(now time.Time) time.Duration {
	wait := time.Second
	if renew := r.held.RenewIn(r.s.Config.Lease); renew > 0 {
		wait = min(wait, renew) // the lease's renewal; if that failed, a second later
	}
	if r.s.Config.SingleNode {
		wait = idlePoll
	}
	if r.dirty {
		wait = saveEvery
	}
	for _, d := range r.cp.Pending {
		if !r.sending[d.ID] {
			wait = min(wait, d.Next.Sub(now))
		}
	}
	if r.starved {
		wait = max(wait, starvedPoll)
	}
	return max(wait, time.Millisecond)
}

// acquire takes the endpoint's lease (lease.Terms.Acquire) while the endpoint is enabled: the
// checkpoint it appends is the last one's, or a first one at the endpoint's start.
func (r *runner) acquire(ctx context.Context) bool {
	terms := lease.Terms{Length: r.s.Config.Lease, Node: r.s.Node, Sole: r.s.Config.SingleNode}
	var ep Endpoint
	var cp Checkpoint
	var expected eventstore.ExpectedRevision
	var found bool
	return terms.Acquire(ctx, func(ctx context.Context) lease.Look {
		var err error
		if ep, err = r.s.Endpoints.Get(r.id, "", true); err != nil || ep.Status != StatusEnabled {
			return lease.Look{Stop: true}
		}
		if cp, expected, found, err = r.s.checkpoint(ctx, r.id); err != nil {
			r.s.Log.Warn("webhook lease", "endpoint", r.id, "error", err)
			return lease.Look{Failed: true}
		}
		rev, _ := expected.Revision() // a checkpoint kept in a backup stream by an earlier release: 0
		return lease.Look{Holder: cp.Node, Revision: rev, Found: found}
	}, func(ctx context.Context) error {
		r.held.Expected, r.cp, r.lost = expected, Checkpoint{Cursor: ep.Start}, false
		if found {
			r.cp = cp
		}
		r.cp.Node = r.s.Node
		return r.save(ctx)
	})
}

// save appends the checkpoint, which renews the lease (lease.Held).
func (r *runner) save(ctx context.Context) error {
	cp := r.cp
	cp.At = r.s.now().UTC()
	ev, err := newEvent(TypeCheckpoint, cp)
	if err != nil {
		return err
	}
	renewed, err := r.held.Renew(ctx, ev)
	if errors.Is(err, lease.ErrLost) {
		r.lost = true
		r.s.logEndpoint(r.id, "lease lost")
	}
	if renewed {
		r.cp, r.dirty = cp, false
	}
	return err
}

// stop waits for the attempts in flight and saves what they did, if the lease is still this
// node's: a graceful stop then re-sends nothing.
func (r *runner) stop(ctx context.Context) {
	ep, _ := r.s.Endpoints.Get(r.id, "", true)
	for len(r.sending) > 0 {
		res := <-r.results
		if ctx.Err() != nil && res.a.Error != "" {
			delete(r.sending, res.id) // cut short by the stop: it stays pending
			continue
		}
		r.finish(ctx, ep, res)
	}
	if r.dirty && !r.lost {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = r.save(sctx)
	}
	r.s.setPending(r.id, 0)
}

// fill adds the deliveries of the log after the cursor to Pending (see room): from the node's
// shared reader of the log while the runner follows it, else by reading the log itself, after
// which it joins the shared reader if it has caught up.
func (r *runner) fill(ctx context.Context, ep Endpoint, now time.Time) error {
	room, ahead := r.room()
	if r.follow != nil {
		if r.takeFromTail(now, room) {
			return nil
		}
		r.follow, r.behind = nil, true // dropped for a full buffer: read on its own
	}
	// Read when a quarter of the room is free (or nothing is pending): a read takes a page of the
	// log, which is wasted on a delivery or two.
	if !r.behind || room <= 0 || (room < ahead/4 && len(r.cp.Pending) > 0) {
		return nil
	}
	end, err := r.read(ctx, ep, now, room)
	if err == nil && end {
		r.follow = r.s.tail.join(ep, r.cp.Cursor, r.s.Config.TailBuffer)
	}
	return err
}

// read reads the log after the cursor into Pending, at most room deliveries and maxScan events;
// end reports that it read to the end of the log.
func (r *runner) read(ctx context.Context, ep Endpoint, now time.Time, room int) (end bool, err error) {
	scanned := 0
	r.behind = false
	opts := eventstore.ReadAllOptions{From: r.cp.Cursor, Filter: eventstore.Filter{StreamPrefixes: []string{command.StreamName("")}}}
	for e, err := range r.s.Feed.ReadAll(ctx, opts) {
		if err != nil {
			r.behind = true
			return false, fmt.Errorf("read the log after %v: %w", r.cp.Cursor, err)
		}
		if e.Position.Compare(r.cp.Cursor) <= 0 {
			continue
		}
		if d, ok := match(ep, e); ok {
			d.Next = now
			r.cp.Pending = append(r.cp.Pending, d)
			room--
		}
		r.cp.Cursor, r.dirty = e.Position, true
		if scanned++; room == 0 || scanned == maxScan {
			r.behind = true
			return false, nil
		}
	}
	return true, nil
}

// readAhead bounds the deliveries a runner holds that have not failed (yet), in attempts in
// flight: enough to keep Config.MaxInFlight orders going, few enough that a checkpoint, which
// holds every pending delivery, stays small while the endpoint is behind; the rest waits in the
// log. Deliveries waiting for a retry do not count: they hold up only their own order.
const readAhead = 8

// room is how many deliveries fill may add to Pending: at most Config.MaxPending in all, and at
// most ahead that have not failed.
func (r *runner) room() (room, ahead int) {
	ahead = min(r.s.Config.MaxPending, readAhead*r.s.Config.MaxInFlight)
	fresh := 0
	for _, d := range r.cp.Pending {
		if d.Tries == 0 && !d.Manual {
			fresh++
		}
	}
	return min(r.s.Config.MaxPending-len(r.cp.Pending), ahead-fresh), ahead
}

// takeFromTail takes the deliveries the shared reader handed to the runner, at most room;
// false if the runner was dropped from it.
func (r *runner) takeFromTail(now time.Time, room int) bool {
	ds, cursor, ok := r.s.tail.take(r.follow, room)
	if !ok {
		return false
	}
	for _, d := range ds {
		if d.Position.Compare(r.cp.Cursor) > 0 { // the runner's own read may have gone past the reader
			d.Next = now
			r.cp.Pending = append(r.cp.Pending, d)
		}
	}
	if cursor.Compare(r.cp.Cursor) > 0 {
		r.cp.Cursor, r.dirty = cursor, true
	}
	return true
}

// match makes the delivery of order event e to ep, if ep wants it: an event of one of its
// principal's orders (the principal that commanded it: only an order's owner commands it), of
// a type it subscribes to.
func match(ep Endpoint, e eventstore.RecordedEvent) (Delivery, bool) {
	if command.PrincipalOf(e.Metadata) != ep.Principal {
		return Delivery{}, false
	}
	return deliveryOf(ep, e)
}

// deliveryOf makes the delivery of e, an event of one of ep's principal's orders, if ep
// subscribes to its type.
func deliveryOf(ep Endpoint, e eventstore.RecordedEvent) (Delivery, bool) {
	t, ok := eventTypes[order.Unversioned(e.Type)]
	if !ok || !ep.wants(t) {
		return Delivery{}, false
	}
	return Delivery{ID: e.ID.String(), Stream: e.Stream, Revision: e.Revision, Position: e.Position,
		OrderID: strings.TrimPrefix(e.Stream, command.StreamName("")), Type: t, Recorded: e.Recorded}, true
}

// start begins the attempts that are due: the first pending delivery of each order (events of
// one order go in log order), up to Config.MaxInFlight, and while the node has room for them
// (Config.MaxAttempts), while the lease outlasts them.
func (r *runner) start(ctx context.Context, ep Endpoint, now time.Time) {
	if !r.s.Config.SingleNode && time.Since(r.held.From)+r.s.Config.Timeout >= r.s.Config.Lease {
		return
	}
	keys, err := r.s.Endpoints.keys(ep, now)
	if err != nil {
		r.s.Log.Error("webhook secret", "endpoint", r.id, "error", err)
		return
	}
	r.starved = false
	first := map[string]bool{}
	for _, d := range r.cp.Pending {
		key := d.OrderID
		if d.Manual {
			key = "manual " + d.ID
		}
		if first[key] {
			continue
		}
		first[key] = true
		if r.sending[d.ID] || d.Next.After(now) {
			continue
		}
		if len(r.sending) >= r.s.Config.MaxInFlight {
			return
		}
		select {
		case r.s.attempts <- struct{}{}:
		default:
			r.starved = true // the node has as many attempts in flight as it may
			return
		}
		r.sending[d.ID] = true
		go func() {
			a := r.attempt(ctx, ep.URL, d, keys)
			<-r.s.attempts
			r.results <- result{d.ID, a}
		}()
	}
}

func (r *runner) attempt(ctx context.Context, url string, d Delivery, keys [][]byte) Attempt {
	body, err := r.body(ctx, d)
	if err != nil {
		return Attempt{At: r.s.now().UTC(), Error: "build the delivery: " + err.Error()}
	}
	return post(ctx, r.s.client, url, d.ID, body, keys, r.s.Config.Timeout, r.s.Config.MaxResponseBytes)
}

// finish applies an attempt's result: a success leaves Pending; a failure is retried on the
// schedule, or dead-lettered after the last attempt, on a 410 Gone, or for a delivery re-sent by
// hand.
func (r *runner) finish(ctx context.Context, ep Endpoint, res result) {
	delete(r.sending, res.id)
	i := slices.IndexFunc(r.cp.Pending, func(d Delivery) bool { return d.ID == res.id })
	if i < 0 {
		return
	}
	now := r.s.now()
	d := &r.cp.Pending[i]
	r.s.observeAttempt(res.a, d.Recorded)
	r.dirty = true
	if res.a.Error == "" {
		r.cp.Pending = slices.Delete(r.cp.Pending, i, i+1)
		r.cp.FailingSince = time.Time{}
		return
	}
	d.Tries++
	d.Attempts = append(d.Attempts, res.a)
	if n := len(d.Attempts) - r.s.Config.MaxAttemptRecords; n > 0 {
		d.Attempts = slices.Delete(d.Attempts, 0, n)
	}
	if r.cp.FailingSince.IsZero() {
		r.cp.FailingSince = now.UTC()
	}
	if res.a.Status == 410 || d.Tries >= len(r.s.Config.Schedule) || d.Manual {
		if err := r.s.deadLetter(ctx, r.id, *d); err != nil {
			r.s.Log.Warn("webhook dead letter", "endpoint", r.id, "error", err)
			d.Next = now.Add(time.Second)
			return
		}
		r.cp.Pending = slices.Delete(r.cp.Pending, i, i+1)
		r.deadAdded = true
	} else {
		delay := r.s.Config.Schedule[d.Tries]
		d.Next = now.Add(delay + time.Duration(rand.Float64()*0.2*float64(delay)))
	}
	r.disableIfFailing(ctx, ep, now)
}

func (r *runner) disableIfFailing(ctx context.Context, ep Endpoint, now time.Time) {
	if r.s.Config.DisableAfter <= 0 || now.Sub(r.cp.FailingSince) < r.s.Config.DisableAfter {
		return
	}
	reason := fmt.Sprintf("failing since %s", r.cp.FailingSince.Format(time.RFC3339))
	if _, err := r.s.Endpoints.SetStatus(ctx, ep.ID, ep.Principal, true, StatusDisabled, reason); err != nil {
		r.s.Log.Warn("webhook disable", "endpoint", r.id, "error", err)
		return
	}
	r.cp.FailingSince = time.Time{}
	r.s.disabledInc()
	r.s.logEndpoint(r.id, "disabled", slog.String("reason", reason))
}

// pollRetries takes the retries asked by hand from the dead-letter stream, about once a second.
func (r *runner) pollRetries(ctx context.Context, now time.Time) error {
	if now.Sub(r.deadPoll) < time.Second {
		return nil
	}
	r.deadPoll = now
	for e, err := range r.s.Store.ReadStream(ctx, deadPrefix+r.id, eventstore.ReadStreamOptions{From: r.cp.DeadRead}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read dead letters of %s: %w", r.id, err)
		}
		r.cp.DeadRead, r.dirty = e.Revision+1, true
		if e.Type != TypeRetryRequested {
			continue
		}
		var rr struct {
			Delivery Delivery `json:"delivery"`
		}
		if err := json.Unmarshal(e.Data, &rr); err != nil {
			return fmt.Errorf("dead letters of %s at %d: %w", r.id, e.Revision, err)
		}
		d := rr.Delivery
		d.Manual, d.Tries, d.Attempts, d.Next = true, 0, nil, now
		r.cp.Pending = append(r.cp.Pending, d)
	}
	return nil
}
