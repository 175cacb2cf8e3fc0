package idempotency

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/acme/orders/eventstore"
)

// Sweep deletes key streams whose TTL has passed, until ctx ends. Its memory does not grow with
// the keys: every interval, it walks the log through feed, in log order, from the oldest key
// claim it has not swept, deleting each expired key, up to the first claim that has not
// expired, and notes where it stopped: a round with nothing to sweep reads that one claim. For
// each expired claim it reads the key and, if the key is still expired, deletes its stream with
// the exact revision read, so that a key claimed anew meanwhile is left alone. Claims expire in
// the order of the log, give or take a request's duration, unless the TTL was shortened or the
// clock set back since: a key claimed after an unexpired one then waits for it. Begin expires
// keys by itself when it meets them: sweeping only reclaims the space of keys nobody retries. A
// store that expires key streams itself (see Keys.Expire) needs no sweeper.
//
// Its first walk goes on to the end of the log, learning the claimed keys for Begin (see
// sweeper.claimed); later claims are learnt as this process makes them.
//
// A round that fails (a read or delete refused by the store) is tried again after a second, or
// the interval if shorter, then twice as long each time up to a minute; each failure goes to
// Keys.Log and Keys.Steps, and SweepErr reports the sweeper failing until a round succeeds. One
// Sweep runs at a time; it returns nil when ctx ends.
func (k *Keys) Sweep(ctx context.Context, feed eventstore.Feed, interval time.Duration) error {
	st, err := k.attachSweeper(feed)
	if err != nil {
		return err
	}
	defer k.detachSweeper()
	first := min(interval, time.Second)
	retry := first
	t := time.NewTimer(0) // the first walk at once
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := k.walk(ctx, st, k.now())
		if ctx.Err() != nil {
			return nil
		}
		k.sweepDone(err)
		wait := interval
		if err != nil {
			wait, retry = retry, min(2*retry, max(interval, time.Minute))
		} else {
			retry = first
		}
		t.Reset(wait)
	}
}

// sweeper is the state of Keys.Sweep, apart from the claims and the memory of completed keys:
// its rounds must not hold up the requests that those serve.
type sweeper struct {
	mu sync.Mutex
	st *sweepState // nil while no sweeper runs
	// known is a table of the key streams claimed, a hash of each at a slot of its own (see
	// claimed), filled by this process's claims and by the sweeper's first walk of the log:
	// its size is fixed, a key claimed later takes the slot of an earlier one.
	known []uint64
	seed  maphash.Seed
	slots int // the size of known; 0 means knownDefault
}

// sweepState is a running sweeper's. The sweeper alone uses feed, caughtUp and after; the rest
// is under sweeper.mu.
type sweepState struct {
	feed     eventstore.Feed
	caughtUp bool                // the first walk, to the end of the log, is done
	after    eventstore.Position // every key claim up to here is swept, or was not expired

	failures int // rounds failed in a row
	lastErr  error
}

// knownDefault is the size of the sweeper's table of claimed keys: 4 MiB.
const knownDefault = 1 << 19

// sweepUnready is how many rounds in a row may fail, each retried sooner than the last,
// before SweepErr reports the sweeper failing: a second or two of a busy store is not.
const sweepUnready = 3

// attachSweeper starts the sweeper's state.
func (k *Keys) attachSweeper(feed eventstore.Feed) (*sweepState, error) {
	k.sweeper.mu.Lock()
	defer k.sweeper.mu.Unlock()
	if k.sweeper.st != nil {
		return nil, errors.New("idempotency: a sweeper is already running")
	}
	k.sweeper.st = &sweepState{feed: feed}
	return k.sweeper.st, nil
}

// detachSweeper ends the sweeper's state.
func (k *Keys) detachSweeper() {
	k.sweeper.mu.Lock()
	defer k.sweeper.mu.Unlock()
	k.sweeper.st = nil
}

// walk sweeps the key streams of the log from st.after on, in log order, up to the first
// claim that has not expired at now, or that it could not sweep; the first walk goes on to the
// end of the log, learning the claimed keys.
func (k *Keys) walk(ctx context.Context, st *sweepState, now time.Time) error {
	filter := eventstore.Filter{StreamPrefixes: []string{StreamPrefix}}
	stopped := false
	for e, err := range st.feed.ReadAll(ctx, eventstore.ReadAllOptions{From: st.after, Filter: filter}) {
		if err != nil {
			return fmt.Errorf("read key streams: %w", err)
		}
		if e.Position.Compare(st.after) <= 0 {
			continue // From is inclusive
		}
		expires, claim := k.claimExpiry(e)
		switch {
		case !claim:
			if !stopped {
				st.after = e.Position
			}
			continue
		case !st.caughtUp:
			k.sweeper.noteKnown(e.Stream)
		}
		switch {
		case stopped:
			// Past where the first walk stops sweeping: only learning the claimed keys.
		case expires.After(now):
			stopped = true
		default:
			changed, err := k.sweepKey(ctx, e.Stream, now)
			if err != nil || changed {
				return err // read again by the next round
			}
			st.after = e.Position
		}
		if stopped && st.caughtUp {
			return nil
		}
	}
	st.caughtUp = true
	return nil
}

// claimExpiry returns when the walk sweeps the key of a claim; claim is false for other
// events. That is the later of the expiry the claim records and the one of this process's TTL
// (Keys.expiry): a takeover's claim records its key's expiry but tells its own, later time,
// and under a TTL changed since, either may be the key's. Never early, so the walk never
// passes a key it should have swept.
func (k *Keys) claimExpiry(e eventstore.RecordedEvent) (expires time.Time, claim bool) {
	var c Claimed
	if (e.Type != TypeClaimed && e.Type != TypeRecorded) || json.Unmarshal(e.Data, &c) != nil {
		return time.Time{}, false
	}
	expires = k.expiry(c)
	if c.ExpiresAt.After(expires) {
		expires = c.ExpiresAt
	}
	return expires, true
}

// sweepKey deletes the key stream if it is expired at now, by the rule Begin applies, at the
// revision it reads. changed reports a delete refused because the stream was written since
// the read.
func (k *Keys) sweepKey(ctx context.Context, stream string, now time.Time) (changed bool, err error) {
	st, err := k.read(ctx, stream)
	switch {
	case err != nil:
		return false, err
	case !st.exists:
		return false, nil // Begin expired it first
	case st.first.ExpiresAt.After(now):
		return false, nil // claimed anew, further on in the log
	}
	err = k.Store.DeleteStream(ctx, stream, eventstore.Exact(st.revision))
	switch {
	case err == nil:
		k.observe(ctx, EventExpired, stream)
		k.sweeper.forget(stream)
		return false, nil
	case errors.Is(err, eventstore.ErrWrongExpectedRevision):
		return true, nil // written to since the read, or expired by Begin
	default:
		return false, fmt.Errorf("delete expired key: %w", err)
	}
}

// noteKnown enters the key stream in the table of claimed keys.
func (w *sweeper) noteKnown(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	slot, tag := w.slot(stream)
	w.known[slot] = tag
}

// claimed reports whether the key stream is known to have been claimed: this process claimed
// it, or a claim of it was in the log the sweeper's first walk read, and no key claimed later
// has taken its slot. It is a hint (see Begin): a key wrongly taken for new is found claimed
// when its claim is refused, one wrongly known costs a read.
func (w *sweeper) claimed(stream string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	slot, tag := w.slot(stream)
	return w.known[slot] == tag
}

// forget takes a key stream the sweeper deleted out of the table of claimed keys.
func (w *sweeper) forget(stream string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slot, tag := w.slot(stream); w.known[slot] == tag {
		w.known[slot] = 0
	}
}

// slot returns where the key stream's hash goes in the table of claimed keys, and the hash
// (never 0, which marks a free slot); it makes the table on first use. Call it with w.mu held.
func (w *sweeper) slot(stream string) (int, uint64) {
	if w.known == nil {
		w.known, w.seed = make([]uint64, cmp.Or(w.slots, knownDefault)), maphash.MakeSeed()
	}
	h := maphash.String(w.seed, stream)
	return int(h % uint64(len(w.known))), h | 1
}

// sweepDone records how a round ended, for SweepErr, and logs and counts a failed one.
func (k *Keys) sweepDone(err error) {
	k.sweeper.mu.Lock()
	if st := k.sweeper.st; st != nil {
		if err == nil {
			st.failures, st.lastErr = 0, nil
		} else {
			st.failures, st.lastErr = st.failures+1, err
		}
	}
	k.sweeper.mu.Unlock()
	if err == nil {
		return
	}
	if k.Steps != nil {
		k.Steps.sweepFailures.Inc()
	}
	if k.Log != nil {
		k.Log.Warn("key sweep failed; retrying", "error", err)
	}
}

// SweepErr reports why the sweeper cannot sweep, once it has failed several rounds in a row
// (each retried sooner than the last), until a round succeeds; nil while it works or none runs.
// It is for readiness: keys that are not swept fill the store.
func (k *Keys) SweepErr() error {
	k.sweeper.mu.Lock()
	defer k.sweeper.mu.Unlock()
	if st := k.sweeper.st; st != nil && st.failures >= sweepUnready {
		return fmt.Errorf("key sweeper failed %d times in a row: %w", st.failures, st.lastErr)
	}
	return nil
}
