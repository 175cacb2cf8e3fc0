package idempotency

import (
	"slices"
	"sync"
	"time"
)

// holds are the claims this process holds on keys, and the requests of this process waiting
// for them: a duplicate of a request running here waits without reading the store, and wakes
// when the claim is let go.
type holds struct {
	mu      sync.Mutex
	waiting map[string]*waiters // by key stream: requests here waiting for its holder
	// holding has, by key stream, the claims of this process not yet let go: usually one, but
	// requests that found the key new at once each hold theirs until the store has refused all
	// but one, so that the key never looks unheld here while one of them stands.
	holding map[string][]held
}

// hold notes a claim of this process, or its new state, so that its duplicates here wait for
// it without reading the key stream; drop ends that when the claim completes or is released.
func (h *holds) hold(stream string, claim held) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding == nil {
		h.holding = make(map[string][]held)
	}
	claims := h.holding[stream]
	for i, held := range claims {
		if held.claim == claim.claim {
			claims[i] = claim
			return
		}
	}
	h.holding[stream] = append(claims, claim)
}

// heldHere returns the claim of this process on the key stream, if one holds it still: within
// its lease and before the key expires, by this process's clock (the claim's times keep their
// monotonic reading); a written claim before one whose append is on its way. A claim whose
// holder never let go (it panicked) is forgotten once its lease ends, and the key stream is
// read again.
func (h *holds) heldHere(stream string, now time.Time) (held, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	claims := slices.DeleteFunc(h.holding[stream], func(c held) bool {
		return !c.claimed.LeaseUntil.After(now) || !c.claimed.ExpiresAt.After(now)
	})
	if len(claims) == 0 {
		delete(h.holding, stream)
		return held{}, false
	}
	h.holding[stream] = claims
	for _, c := range claims {
		if !c.unwritten {
			return c, true
		}
	}
	return claims[len(claims)-1], true
}

// drop ends the hold of claim c and wakes the requests here waiting for the key.
func (h *holds) drop(c *Claim) {
	h.mu.Lock()
	claims := slices.DeleteFunc(h.holding[c.Stream], func(held held) bool { return held.claim == c })
	if len(claims) == 0 {
		delete(h.holding, c.Stream)
	} else {
		h.holding[c.Stream] = claims
	}
	h.mu.Unlock()
	h.wake(c.Stream)
}

// watch notes that a request of this process waits for the key stream's holder, until
// unwatch; meanwhile changes gives it a channel closed when this process next completes or
// releases that key. Waiters wake at once for their key, and only for theirs.
func (h *holds) watch(stream string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting == nil {
		h.waiting = make(map[string]*waiters)
	}
	w := h.waiting[stream]
	if w == nil {
		w = &waiters{changed: make(chan struct{})}
		h.waiting[stream] = w
	}
	w.n++
}

func (h *holds) unwatch(stream string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiting[stream]; w != nil {
		if w.n--; w.n == 0 {
			delete(h.waiting, stream)
		}
	}
}

// changes returns the channel that wake closes next for a watched key stream.
func (h *holds) changes(stream string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting[stream].changed
}

func (h *holds) wake(stream string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.waiting[stream]; w != nil {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}
