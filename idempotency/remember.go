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
// at about 1 KiB each, some 64 MiB at most.
const rememberDefault = 65536

// memory returns the cache of completed keys, or nil if Remember turned it off.
func (k *Keys) memory() *lru.Cache[string, remembered] {
	k.memoryOnce.Do(func() {
		n := k.Remember
		if n == 0 {
			n = rememberDefault
		}
		if n > 0 {
			k.done, _ = lru.New[string, remembered](n) // n > 0 cannot fail
		}
	})
	return k.done
}

// remember keeps the outcome stored in a key's stream for later replays. A completed key
// never changes until it expires, so what is kept stays true on every node.
func (k *Keys) remember(stream string, first Claimed, done *Completed) {
	if m := k.memory(); m != nil && done != nil {
		m.Add(stream, remembered{fingerprint: first.Fingerprint, expiresAt: first.ExpiresAt, outcome: done.Outcome})
	}
}

// recall returns the completed key stream as remembered, unless it is unknown here or has
// expired.
func (k *Keys) recall(stream string, now time.Time) (remembered, bool) {
	m := k.memory()
	if m == nil {
		return remembered{}, false
	}
	r, ok := m.Get(stream)
	if ok && !r.expiresAt.After(now) {
		m.Remove(stream)
		return remembered{}, false
	}
	return r, ok
}
