package webhooks

import (
	"slices"
	"sync"

	"github.com/acme/orders/eventstore"
	"github.com/prometheus/client_golang/prometheus"
)

// tail hands the order events that the node's one reader of the log (Service.watch) follows to
// the runners caught up with it, so that a thousand endpoints do not read the same events a
// thousand times. A runner joins once a read of its own has reached the end of the log at or
// past the last event handed out; from then on it takes its deliveries from its follower's
// buffer. The buffer is bounded (Config.TailBuffer): when an event would overflow it, the
// follower is dropped and its runner reads on its own again from its cursor, so a slow or
// dead endpoint never holds up the reader or the others.
type tail struct {
	mu        sync.Mutex
	last      eventstore.Position // the last order event handed out
	handed    bool                // some event was handed out
	followers map[string][]*follower
	fallbacks int // followers dropped for a full buffer
}

// follower is a runner's place in the tail: the deliveries handed to it and not yet taken.
type follower struct {
	ep      Endpoint
	max     int
	buf     []Delivery
	dropped bool
}

// hand gives order event e, commanded by principal, to the followers of principal's endpoints
// that want it, and records it as the last handed out. A follower whose buffer is full is
// dropped.
func (t *tail) hand(e eventstore.RecordedEvent, principal string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last, t.handed = e.Position, true
	fs, ok := t.followers[principal]
	if !ok {
		return
	}
	for i := 0; i < len(fs); i++ {
		f := fs[i]
		d, ok := deliveryOf(f.ep, e)
		if !ok {
			continue
		}
		if len(f.buf) >= f.max {
			f.dropped, f.buf = true, nil
			fs = slices.Delete(fs, i, i+1)
			i--
			t.fallbacks++
			continue
		}
		f.buf = append(f.buf, d)
	}
	t.followers[principal] = fs
}

// join makes ep's runner a follower, holding at most max deliveries, if it has read the log up
// to cursor and that is at or past the last event handed out (nil otherwise: it reads on).
// The runner's read began after the reader's first position (Service.Run starts it first), so
// until an event is handed out every runner that read to the end may join.
func (t *tail) join(ep Endpoint, cursor eventstore.Position, max int) *follower {
	t.mu.Lock()
	defer t.mu.Unlock()
	if max <= 0 || (t.handed && cursor.Compare(t.last) < 0) {
		return nil
	}
	if t.followers == nil {
		t.followers = map[string][]*follower{}
	}
	f := &follower{ep: ep, max: max}
	t.followers[ep.Principal] = append(t.followers[ep.Principal], f)
	return f
}

// take returns up to room deliveries handed to f, and the log position read up to with them:
// the last event handed out once f's buffer is empty (Start if none). It returns false if f was
// dropped.
func (t *tail) take(f *follower, room int) ([]Delivery, eventstore.Position, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.dropped {
		return nil, eventstore.Start, false
	}
	n := min(max(room, 0), len(f.buf))
	ds := slices.Clone(f.buf[:n])
	f.buf = slices.Delete(f.buf, 0, n)
	switch {
	case len(f.buf) == 0 && t.handed:
		return ds, t.last, true
	case n > 0:
		return ds, ds[n-1].Position, true
	}
	return ds, eventstore.Start, true
}

// leave removes f from the tail.
func (t *tail) leave(f *follower) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.followers[f.ep.Principal]
	if i := slices.Index(fs, f); i >= 0 {
		t.followers[f.ep.Principal] = slices.Delete(fs, i, i+1)
	}
	if len(t.followers[f.ep.Principal]) == 0 {
		delete(t.followers, f.ep.Principal)
	}
	f.dropped, f.buf = true, nil
}

// counts returns the followers now and the followers dropped so far.
func (t *tail) counts() (following, fallbacks int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, fs := range t.followers {
		following += len(fs)
	}
	return following, t.fallbacks
}

// tailMetrics are the gauges of the shared reader: runners following it, and runners dropped
// from it for a full buffer.
func tailMetrics(s *Service) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orders_webhooks_tail_followers",
			Help: "Endpoint runners on this node taking their events from the node's one reader of the log.",
		}, func() float64 { n, _ := s.tail.counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "orders_webhooks_tail_fallbacks_total",
			Help: "Runners dropped from the node's reader of the log for a full buffer (--webhooks-tail-buffer); each reads on its own until it catches up.",
		}, func() float64 { _, n := s.tail.counts(); return float64(n) }),
	}
}
