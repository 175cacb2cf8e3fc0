package idempotency

import (
	"slices"
	"sync"
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
	holding map[string][]*Claim
}

// hold notes a claim of this process, so that its duplicates here wait for it without reading
// the key stream; drop ends that when the claim is kept, completed or let go.
func (h *holds) hold(c *Claim) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holding == nil {
		h.holding = make(map[string][]*Claim)
	}
	h.holding[c.Stream] = append(h.holding[c.Stream], c)
}

// heldHere reports whether a claim of this process holds the key stream.
func (h *holds) heldHere(stream string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holding[stream]) > 0
}

// drop ends the hold of claim c and wakes the requests here waiting for the key.
func (h *holds) drop(c *Claim) {
	h.mu.Lock()
	claims := slices.DeleteFunc(h.holding[c.Stream], func(held *Claim) bool { return held == c })
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
