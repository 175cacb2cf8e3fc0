package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/acme/orders/eventstore"
)

// Sweep deletes key streams whose TTL has passed, until ctx ends. It follows the key streams
// through feed from the start of the log, so it needs no state of its own across restarts;
// every interval it deletes the expired ones it knows, each with the exact revision it last
// saw, so that a key claimed anew meanwhile is left alone. Begin expires keys by itself when
// it meets them: sweeping only reclaims the space of keys nobody retries. A store that expires
// key streams itself (see Keys.Expire) needs no sweeper.
func (k *Keys) Sweep(ctx context.Context, feed eventstore.Feed, interval time.Duration) error {
	var mu sync.Mutex
	type live struct {
		expires  time.Time
		revision uint64
	}
	keys := map[string]live{}
	follow := make(chan error, 1)
	go func() {
		filter := eventstore.Filter{StreamPrefixes: []string{StreamPrefix}}
		for e, err := range feed.SubscribeAll(ctx, eventstore.SubscribeOptions{Filter: filter}) {
			if err != nil {
				follow <- err
				return
			}
			mu.Lock()
			l := keys[e.Stream]
			if e.Type == TypeClaimed {
				// Every claim of a key's life, takeovers included, carries that life's expiry.
				var c Claimed
				if json.Unmarshal(e.Data, &c) == nil {
					l.expires = c.ExpiresAt
				}
			}
			l.revision = e.Revision
			keys[e.Stream] = l
			mu.Unlock()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case err := <-follow:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-t.C:
		}
		now := k.now()
		mu.Lock()
		var due []string
		var revs []uint64
		for stream, l := range keys {
			if !l.expires.IsZero() && !l.expires.After(now) {
				due = append(due, stream)
				revs = append(revs, l.revision)
			}
		}
		mu.Unlock()
		for i, stream := range due {
			err := k.Store.DeleteStream(ctx, stream, eventstore.Exact(revs[i]))
			if err == nil {
				k.observe(ctx, EventExpired, stream)
			}
			switch {
			case err == nil, errors.Is(err, eventstore.ErrWrongExpectedRevision):
				// Deleted, or changed since: either way the follower has the news.
				mu.Lock()
				if keys[stream].revision == revs[i] {
					delete(keys, stream)
				}
				mu.Unlock()
			case ctx.Err() != nil:
				return nil
			default:
				return err
			}
		}
	}
}
