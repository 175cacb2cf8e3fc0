package command

import (
	"context"
	"sync"
)

// queues makes the commands on one order that reach this process at once run one after
// another, so that they do not refuse each other's appends: the exact-revision append stays
// the guard between processes only. An order has a queue while a command runs or waits on it,
// so there are never more queues than commands in flight.
type queues struct {
	mu sync.Mutex
	m  map[string]*queue
}

// queue is one order's: a token to hold, and how many commands hold it or wait for it.
type queue struct {
	token chan struct{}
	n     int
}

// enter waits for the order's turn, or for ctx to end; call the returned func to leave.
func (qs *queues) enter(ctx context.Context, id string) (leave func(), err error) {
	qs.mu.Lock()
	if qs.m == nil {
		qs.m = make(map[string]*queue)
	}
	q := qs.m[id]
	if q == nil {
		q = &queue{token: make(chan struct{}, 1)}
		qs.m[id] = q
	}
	q.n++
	qs.mu.Unlock()
	select {
	case q.token <- struct{}{}:
		return func() { <-q.token; qs.done(id, q) }, nil
	case <-ctx.Done():
		qs.done(id, q)
		return nil, ctx.Err()
	}
}

func (qs *queues) done(id string, q *queue) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if q.n--; q.n == 0 {
		delete(qs.m, id)
	}
}
