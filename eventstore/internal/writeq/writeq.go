// Package writeq hands a store's writes to the one goroutine that commits them, several in one
// transaction (group commit): the embedded store's writer and each PostgreSQL node's.
package writeq

import (
	"context"

	"github.com/acme/orders/eventstore"
)

// Request is one append, multi-stream append, delete or truncate waiting for the writer.
type Request struct {
	Ctx context.Context
	// Appends are made all or nothing. A delete or a truncate has none: it deletes Stream at
	// Expected, or its events before revision Before.
	Appends  []eventstore.StreamAppend
	Stream   string
	Expected eventstore.ExpectedRevision
	Truncate bool
	Before   uint64

	Results []eventstore.AppendResult // one per append
	Err     error
	// Done is closed once Results and Err are final (Answer).
	Done     chan struct{}
	answered bool // only the writer reads or sets it
}

// Answer hands r's outcome to its caller, once. Only the writer calls it.
func (r *Request) Answer() {
	if !r.answered {
		r.answered = true
		close(r.Done)
	}
}

// Answered reports whether r has its outcome. Only the writer calls it.
func (r *Request) Answered() bool { return r.answered }

// Submit hands r to the writer through requests and waits for its outcome; closing closed
// means the store is closing. If r.Ctx ends after the writer took r, r may still be committed.
func Submit(r *Request, requests chan<- *Request, closing <-chan struct{}) error {
	r.Done = make(chan struct{})
	select {
	case requests <- r:
	case <-closing:
		return eventstore.ErrClosed
	case <-r.Ctx.Done():
		return r.Ctx.Err()
	}
	select {
	case <-r.Done:
		return r.Err
	case <-r.Ctx.Done():
		return r.Ctx.Err()
	}
}
