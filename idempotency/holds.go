package idempotency

import (
	"sync"
	"time"
)

// holds are the claims this process holds on keys, and the requests of this process waiting
// for them: a duplicate of a request running here waits without reading the store, and wakes
// when the claim is let go.
type holds struct {
	mu      sync.Mutex
	waiting map[string]*waiters // by key stream: requests here waiting for its holder
	holding map[string]held     // by key stream: claims of this process not yet let go
}

// answered hands the claim's answer to its duplicates here, before its outcome is recorded.
func (h *holds) answered(c *Claim, out Outcome) {
	h.mu.Lock()
	if held, ok := h.holding[c.Stream]; ok && held.claim == c && !held.unwritten {
		held.answer = &out
		h.holding[c.Stream] = held
	}
	h.mu.Unlock()
	h.wake(c.Stream)
}

// hold notes a claim of this process, so that its duplicates here wait for it without reading
// the key stream; drop ends that when the claim completes or is released. A claim not yet
// written does not displace one written: its append will be refused.
func (h *holds) hold(stream string, claim held) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding == nil {
		h.holding = make(map[string]held)
	}
	if was, ok := h.holding[stream]; ok && claim.unwritten && !was.unwritten {
		return
	}
	h.holding[stream] = claim
}

// heldHere returns the claim of this process on the key stream, if one holds it still: within
// its lease and before the key expires, by this process's clock (the claim's times keep their
// monotonic reading). A claim whose holder never let go (it panicked) is forgotten once its
// lease ends, and the key stream is read again.
func (h *holds) heldHere(stream string, now time.Time) (held, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	claim, ok := h.holding[stream]
	if ok && (!claim.claimed.LeaseUntil.After(now) || !claim.claimed.ExpiresAt.After(now)) {
		delete(h.holding, stream)
		return held{}, false
	}
	return claim, ok
}

// drop ends the hold of claim c, if it is still this process's latest claim of its key, and
// wakes the requests here waiting for the key.
func (h *holds) drop(c *Claim) {
	h.mu.Lock()
	if claim, ok := h.holding[c.Stream]; ok && claim.claim == c {
		delete(h.holding, c.Stream)
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
