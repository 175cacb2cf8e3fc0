package command

import (
	"context"
	"errors"

	"unsafe"

	"github.com/acme/orders/eventstore"

	"github.com/acme/orders/bytecache"
	"github.com/acme/orders/domain/order"
)

// cachedOrder is an order as this handler last folded or wrote it, so that the next command on it
// needs no read: it is decided on this state and appended at its revision, and the store
// refuses the append if the order moved meanwhile (another node, another process), after
// which the command is decided again on the order read afresh. A decision that appends
// nothing is confirmed against the store's revision before it is answered (see unchanged), and a
// keyed append asks whether it was written, since the store takes an append of event ids it
// already holds for a repeat (see Handler.mine).
type cachedOrder struct {
	order Order // without Key
	// keys holds principal + "\x00" + key of every keyed event of the order: a command whose
	// key is here was already applied and is answered from the stream (see Handler.Load).
	keys map[string]struct{}
}

// CachedOrdersDefault is how many bytes of orders a handler keeps unless told otherwise.
const CachedOrdersDefault = 16 << 20

// What a cached order takes beyond its state's strings, lines, charges and keys: the cache's
// list entry and map slot, the order's struct, the keys' map. Charged generously: measured by
// BenchmarkCachedOrderBytes.
const (
	cachedOverhead = 1024
	lineSize       = int64(unsafe.Sizeof(order.Line{}))
	// A duplicate charge, its slot in the index by payment id, and its payment id at the most it
	// can be: charged without walking an order's charges, of which there may be thousands.
	chargeSize = int64(unsafe.Sizeof(order.Charge{})) + 48 + order.MaxIDLen
	keySlot    = 48 // a key's slot in the keys' map, its string's header
)

// size is what caching r costs in memory, in bytes: each string rounded up as the allocator
// does, each slice at its capacity. Its work is that of the command that caches r: it reads
// the order's lines and keys, which the command copied, not its charges.
func (r cachedOrder) size() int64 {
	s := &r.order.State
	n := int64(cachedOverhead) + str(s.ID) + str(s.CustomerID) + str(s.ClientRef) + str(s.Channel) +
		str(s.PaymentID) + str(s.RefundID) + str(s.Carrier) + str(s.TrackingNumber) + str(s.CancelReason) +
		str(r.order.Hash) + str(r.order.Owner) + int64(cap(s.Lines))*lineSize
	for _, l := range s.Lines {
		n += str(l.SKU) + str(l.Name)
	}
	n += int64(s.DuplicateCharges.Len()) * chargeSize
	for k := range r.keys {
		n += keySlot + str(k)
	}
	return n
}

// str bounds the heap a string takes: its bytes rounded up to the allocator's size class (by
// 8 bytes up to 32, by 16 up to 128, by at most an eighth beyond).
func str(s string) int64 {
	n := int64(len(s))
	switch {
	case n <= 32:
		return (n + 7) &^ 7
	case n <= 128:
		return (n + 15) &^ 15
	}
	return n + n/8
}

func keyOf(principal, key string) string { return principal + "\x00" + key }

// orderCache returns the cache of orders, or nil if CachedOrderBytes turned it off.
func (h *Handler) orderCache() *bytecache.Cache[string, cachedOrder] {
	h.ordersOnce.Do(func() {
		n := h.CachedOrderBytes
		if n == 0 {
			n = CachedOrdersDefault
		}
		if n > 0 {
			h.orders = bytecache.New[string, cachedOrder](n, cachedOverhead)
		}
	})
	return h.orders
}

// CachedBytes is what the orders cached take, as charged against CachedOrderBytes.
func (h *Handler) CachedBytes() int64 { return h.orderCache().Bytes() }

// cached returns the order cached for stream.
func (h *Handler) cached(stream string) (cachedOrder, bool) {
	if m := h.orderCache(); m != nil {
		return m.Get(stream)
	}
	return cachedOrder{}, false
}

// cache keeps r for stream unless a later version of the order is kept already: commands
// finishing out of order must not bring an older state back.
func (h *Handler) cache(stream string, r cachedOrder) {
	m := h.orderCache()
	if m == nil {
		return
	}
	m.AddUnless(stream, r, r.size(), func(held cachedOrder) bool { return held.order.State.Version >= r.order.State.Version })
}

// uncache drops the order cached for stream if it is at version or before, known stale: a
// later one was cached meanwhile by a command that wrote it (another command on the order
// here, which won the race this one lost), and the next attempt can start from that.
func (h *Handler) uncache(stream string, version int64) {
	m := h.orderCache()
	if m == nil {
		return
	}
	m.RemoveIf(stream, func(held cachedOrder) bool { return held.order.State.Version <= version })
}

// unchanged reports whether the cached order o is still the stream's latest version.
func (h *Handler) unchanged(ctx context.Context, stream string, o Order) (bool, error) {
	for e, err := range h.Store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return o.State.Version == 0, nil
		}
		if err != nil {
			return false, err
		}
		return o.State.Version > 0 && e.Revision == o.Revision(), nil
	}
	return o.State.Version == 0, nil
}

// with returns r with a command's key added to the keys, leaving r's own set as it is.
func (r cachedOrder) with(md Metadata) cachedOrder {
	if md.IdempotencyKey == "" {
		return r
	}
	keys := make(map[string]struct{}, len(r.keys)+1)
	for k := range r.keys {
		keys[k] = struct{}{}
	}
	keys[keyOf(md.Principal, md.IdempotencyKey)] = struct{}{}
	r.keys = keys
	return r
}

// current returns order id as a command with md is decided on: the cached one (cached true)
// unless md's key is among its keys, else the one read from the store, which is then
// cached.
func (h *Handler) current(ctx context.Context, id string, md Metadata) (o Order, cached bool, err error) {
	stream := StreamName(id)
	r, ok := h.cached(stream)
	if ok {
		if _, applied := r.keys[keyOf(md.Principal, md.IdempotencyKey)]; md.IdempotencyKey == "" || !applied {
			return r.order, true, nil
		}
	}
	if h.orderCache() == nil {
		o, err := h.Load(ctx, id, md.Principal, md.IdempotencyKey)
		return o, false, err
	}
	keys := map[string]struct{}{}
	if o, err = h.load(ctx, id, md.Principal, md.IdempotencyKey, keys); err != nil {
		return Order{}, false, err
	}
	if o.State.Version > 0 {
		kept := o
		kept.Key = nil
		h.cache(stream, cachedOrder{order: kept, keys: keys})
	}
	return o, false, nil
}
