package idempotency

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// remembered is a completed key as stored: what a replay needs without reading the stream.
type remembered struct {
	fingerprint string
	expiresAt   time.Time
	outcome     Outcome
}

// rememberDefault is how many completed keys a Keys keeps in memory unless told otherwise:
// at about 1 KiB each, some 64 MiB at most, and 8 MiB more for keys read back (see memory).
const rememberDefault = 65536

// memory returns the cache of keys completed here, or nil if Remember turned it off, and the
// cache of keys read from the store for a replay, an eighth of its size. Were they one, the
// replays of keys older than the memory holds, oldest first (a client sending its backlog
// again, the load harness's replay phase), would each push out the oldest key remembered,
// which is the one the next replays ask for: every one of them would read the store (an LRU
// cache's sequential scan). Kept apart, the keys read push out only each other.
func (k *Keys) memory() (done, read *lru.Cache[string, remembered]) {
	k.memoryOnce.Do(func() {
		n := k.Remember
		if n == 0 {
			n = rememberDefault
		}
		if n > 0 {
			k.done, _ = lru.New[string, remembered](n) // n > 0 cannot fail
			k.older, _ = lru.New[string, remembered](max(n/8, 1))
		}
	})
	return k.done, k.older
}

// remember keeps the outcome stored in a key's stream for later replays, with the keys
// completed here, or with those read from the store if read is set. A completed key never
// changes until it expires, so what is kept stays true on every node.
func (k *Keys) remember(stream string, first Claimed, done *Completed, read bool) {
	here, fromStore := k.memory()
	if here == nil || done == nil {
		return
	}
	m := here
	if read {
		m = fromStore
	}
	m.Add(stream, remembered{fingerprint: first.Fingerprint, expiresAt: first.ExpiresAt, outcome: done.Outcome})
}

// recall returns the completed key stream as remembered, unless it is unknown here or has
// expired.
func (k *Keys) recall(stream string, now time.Time) (remembered, bool) {
	here, fromStore := k.memory()
	if here == nil {
		return remembered{}, false
	}
	m := here
	r, ok := here.Get(stream)
	if !ok {
		m = fromStore
		r, ok = fromStore.Get(stream)
	}
	if ok && !r.expiresAt.After(now) {
		m.Remove(stream)
		return remembered{}, false
	}
	return r, ok
}
