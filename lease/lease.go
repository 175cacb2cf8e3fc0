// Package lease is the service's one lease, which a key's claim and an endpoint's deliveries
// take alike. A holder reserves a stream by appending to it; another process takes over only
// once it has seen the stream's last revision stay the last for the lease's length by its own
// monotonic clock, and its takeover appends at that very revision, so the store fences out a
// holder that comes back late. No wall clock is compared across processes.
package lease

import (
	"cmp"
	"context"
	"sync"
	"time"
)

// Terms are the terms of the leases one process takes and observes.
type Terms struct {
	// Length is how long a holder's last append reserves its stream.
	Length time.Duration
	// Node names this process in the leases it takes; it differs between processes.
	Node string
	// Sole: the store has one server, whose data this process has locked, so a holder named by
	// another node is a process that died.
	Sole bool
}

// Sighting is what an observer has seen of another holder's lease: the stream's last revision,
// and when the observer first saw it, by its own clock.
type Sighting struct {
	Revision uint64
	Since    time.Time
}

// Over reports whether the lease of holder (a node's name), whose last append to the stream has
// revision rev, is over at now, and how long after now it will be if the stream does not move;
// s is the observer's sighting of the stream, which Over keeps. A lease named by this process is
// over at once, since only a stream this process does not hold is looked at, and so is any on a
// sole server. now must keep its monotonic reading (time.Now's, not a decoded time).
func (t Terms) Over(s *Sighting, holder string, rev uint64, now time.Time) (bool, time.Duration) {
	if t.Sole || (t.Node != "" && holder == t.Node) {
		return true, 0
	}
	if s.Since.IsZero() || s.Revision != rev {
		*s = Sighting{Revision: rev, Since: now}
	}
	left := s.Since.Add(t.Length).Sub(now)
	return left <= 0, left
}

// Sightings are an observer's sightings of many streams, at most Max of them (0 means
// MaxSightings): one forgotten to make room only has its next observer wait a whole lease again.
// A sighting is dropped once its lease is seen over.
type Sightings struct {
	mu  sync.Mutex
	Max int
	m   map[string]Sighting
}

// MaxSightings is the default bound of Sightings: streams whose holders are waited for at once.
const MaxSightings = 4096

// Over is Terms.Over for stream, with the sighting kept here.
func (ss *Sightings) Over(t Terms, stream, holder string, rev uint64, now time.Time) (bool, time.Duration) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[stream]
	over, left := t.Over(&s, holder, rev, now)
	if over {
		delete(ss.m, stream)
		return over, left
	}
	if _, ok := ss.m[stream]; !ok && len(ss.m) >= cmp.Or(ss.Max, MaxSightings) {
		for old := range ss.m {
			delete(ss.m, old) // any one: map order is as good as any
			break
		}
	}
	if ss.m == nil {
		ss.m = make(map[string]Sighting)
	}
	ss.m[stream] = s
	return over, left
}

// Look is what a holder-to-be saw of a stream whose appends name their holders.
type Look struct {
	Holder   string // the node that appended last
	Revision uint64 // the revision of that append
	Found    bool   // the stream has an append
	Failed   bool   // the stream could not be read (the look logged why): look again later
	Stop     bool   // the lease is no longer wanted
}

// Acquire takes the lease of a stream whose every append names its holder and renews its
// lease: it looks at the stream until the last holder's lease is over (at most a second
// between looks), then takes it with take, the append at the revision seen, which the store
// refuses should another process append first (and Acquire looks again). It returns false
// once ctx ends or a look stops.
func (t Terms) Acquire(ctx context.Context, look func(context.Context) Look, take func(context.Context) error) bool {
	var seen Sighting
	for ctx.Err() == nil {
		l := look(ctx)
		if l.Stop {
			return false
		}
		over, left := true, time.Duration(0)
		if l.Found {
			over, left = t.Over(&seen, l.Holder, l.Revision, time.Now())
		}
		wait := time.Second
		switch {
		case l.Failed:
		case !over:
			wait = min(wait, t.Length/4, left)
		case take(ctx) == nil:
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return false
}
