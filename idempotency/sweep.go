package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// Sweep deletes key streams whose TTL has passed, until ctx ends. It learns the keys claimed
// before it started from one pass over the log through feed, so it needs no state of its own
// across restarts, and every later key from this process's own claims, which note their
// expiry in memory from the moment Sweep starts: it does not follow the log, which would wake
// it on every commit. Every interval it reads each key whose noted expiry has passed and, if
// the key is still expired, deletes its stream with the exact revision read, so that a key
// claimed anew meanwhile is left alone. Begin expires keys by itself when it meets them:
// sweeping only reclaims the space of keys nobody retries. A store that expires key streams
// itself (see Keys.Expire) needs no sweeper.
//
// Sweep relies on this process being the only writer of key streams after its catch-up pass,
// as with the embedded store, whose data directory one server holds. A key claimed by another
// process would be swept only when Begin meets it expired, or by the next restart's pass.
// One Sweep runs at a time; it returns the first error of the feed or the store, and nil when
// ctx ends.
func (k *Keys) Sweep(ctx context.Context, feed eventstore.Feed, interval time.Duration) error {
	if err := k.attachSweeper(); err != nil {
		return err
	}
	defer k.detachSweeper()
	err := k.catchUp(ctx, feed)
	t := time.NewTicker(interval)
	defer t.Stop()
	for err == nil {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err = k.sweepDue(ctx)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// attachSweeper has claims note their expiry from now on. It comes before the catch-up pass:
// a claim appended before it is in the log that the pass reads, and one appended after it
// notes itself (claim notes once its append returns).
func (k *Keys) attachSweeper() error {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	if k.expiries != nil {
		return errors.New("idempotency: a sweeper is already running")
	}
	k.expiries = make(map[string]time.Time)
	return nil
}

// detachSweeper stops the noting, so that no index grows without a sweeper to empty it.
func (k *Keys) detachSweeper() {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	k.expiries = nil
}

// noteExpiry records, for a running sweeper, that the key stream expires at expires. The
// latest expiry noted stands: a key that Begin deleted and claimed again lives on to its new
// expiry, whatever older news of its stream comes later.
func (k *Keys) noteExpiry(stream string, expires time.Time) {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	if k.expiries == nil {
		return
	}
	if old, ok := k.expiries[stream]; !ok || expires.After(old) {
		k.expiries[stream] = expires
	}
}

// known reports whether a running sweeper has noted the key stream: a claim of it was in the
// log its pass read, or this process claimed it since. Without a sweeper nothing is known.
func (k *Keys) known(stream string) bool {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	_, ok := k.expiries[stream]
	return ok
}

// forget drops the entry of a key stream the sweeper found gone or deleted, unless a claim
// noted a new expiry since the sweeper took noted: that is the key's next life.
func (k *Keys) forget(stream string, noted time.Time) {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	if expires, ok := k.expiries[stream]; ok && expires.Equal(noted) {
		delete(k.expiries, stream)
	}
}

// catchUp notes the expiry of every key stream in the log. Deleted streams have left the log
// of the embedded store; every claim of a key's life, takeovers included, carries its expiry.
func (k *Keys) catchUp(ctx context.Context, feed eventstore.Feed) error {
	filter := eventstore.Filter{StreamPrefixes: []string{StreamPrefix}}
	for e, err := range feed.ReadAll(ctx, eventstore.ReadAllOptions{From: eventstore.Start, Filter: filter}) {
		if err != nil {
			return fmt.Errorf("read key streams: %w", err)
		}
		var c Claimed
		if e.Type == TypeClaimed && json.Unmarshal(e.Data, &c) == nil {
			k.noteExpiry(e.Stream, c.ExpiresAt)
		}
	}
	return nil
}

// dueKey is a key stream whose noted expiry has passed.
type dueKey struct {
	stream  string
	expires time.Time
}

// due returns the key streams noted to expire at or before now.
func (k *Keys) due(now time.Time) []dueKey {
	k.sweepMu.Lock()
	defer k.sweepMu.Unlock()
	var due []dueKey
	for stream, expires := range k.expiries {
		if !expires.After(now) {
			due = append(due, dueKey{stream, expires})
		}
	}
	return due
}

// sweepDue sweeps every key stream due now. The index is only a hint of what to read: each
// key's stream says whether it is still expired.
func (k *Keys) sweepDue(ctx context.Context) error {
	now := k.now()
	for _, d := range k.due(now) {
		if err := k.sweepKey(ctx, d, now); err != nil {
			return err
		}
	}
	return nil
}

// sweepKey deletes the key stream if it is expired at now, by the rule Begin applies, at the
// revision it reads.
func (k *Keys) sweepKey(ctx context.Context, d dueKey, now time.Time) error {
	st, err := k.read(ctx, d.stream)
	switch {
	case err != nil:
		return err
	case !st.exists:
		k.forget(d.stream, d.expires) // Begin expired it first
		return nil
	case st.first.ExpiresAt.After(now):
		k.noteExpiry(d.stream, st.first.ExpiresAt)
		return nil
	}
	err = k.Store.DeleteStream(ctx, d.stream, eventstore.Exact(st.revision))
	switch {
	case err == nil:
		k.observe(ctx, EventExpired, d.stream)
		k.forget(d.stream, d.expires)
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		// Written to since the read, or expired by Begin: the next round reads it again.
	default:
		return fmt.Errorf("delete expired key: %w", err)
	}
	return nil
}
