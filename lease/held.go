package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/orders/eventstore"
)

// ErrLost: another process took the stream over; this one holds the lease no more.
var ErrLost = fmt.Errorf("lease lost: %w", eventstore.ErrWrongExpectedRevision)

// CompactAfter bounds a held stream: after this many renewals it is truncated to its last record.
const CompactAfter = 1000

// Held is a lease this process holds on a stream by appending records to it, as the webhooks'
// runners and the NATS publisher hold theirs: each Renew appends the next record at the revision
// of the last, which the store refuses once another process has taken the stream over
// (ErrLost), and every CompactAfter renewals it truncates the stream to its last record. A
// process that lost the lease truncates only records older than its own last: the holder's
// are later.
type Held struct {
	Store  eventstore.Store
	Stream string
	// Expected is the revision the next record is appended at: the one Acquire's look saw,
	// then the last record's.
	Expected eventstore.ExpectedRevision
	// From is when the append of the last record began, by this process's monotonic clock: no
	// other process takes the lease over until the lease's length after it.
	From     time.Time
	renewals int
}

// Renew appends ev, the holder's next record, which renews the lease; renewed says the append
// was made, even if the compaction after it failed (err).
func (h *Held) Renew(ctx context.Context, ev eventstore.EventData) (renewed bool, err error) {
	from := time.Now() // before the append: a taker sees its revision only after
	res, err := h.Store.Append(ctx, h.Stream, h.Expected, ev)
	if errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		return false, ErrLost
	}
	if err != nil {
		return false, fmt.Errorf("renew the lease of %s: %w", h.Stream, err)
	}
	h.Expected, h.From = eventstore.Exact(res.Revision), from
	if h.renewals++; h.renewals >= CompactAfter {
		h.renewals = 0
		if err := h.Store.Truncate(ctx, h.Stream, res.Revision); err != nil {
			return true, fmt.Errorf("compact %s: %w", h.Stream, err)
		}
	}
	return true, nil
}

// RenewIn is how long until the holder of a lease of length renews it: a third of length after
// its last record's append began, which leaves two more tries before the lease runs out. Zero
// or less: now.
func (h *Held) RenewIn(length time.Duration) time.Duration {
	return time.Until(h.From.Add(length / 3))
}
