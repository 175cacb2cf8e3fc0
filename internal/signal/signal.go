// Package signal wakes every goroutine waiting for something to happen: new commits in a
// store, new events of a client's orders.
package signal

import "sync"

// Signal wakes every goroutine waiting on it. The zero Signal is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel that the next Notify closes. Take it before looking, so that what
// happens after the look is not missed.
func (g *Signal) Wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	return g.ch
}

// Notify wakes every goroutine waiting on a channel Wait returned.
func (g *Signal) Notify() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}
