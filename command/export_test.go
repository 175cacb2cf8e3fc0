package command

import (
	"context"

	"github.com/acme/orders/domain/order"
)

// HandleKept is Handle for a keyed command whose key's outcome is then kept (Plan.Keep), as the
// keyed pipeline does: for tests that hold the key themselves.
func (h *Handler) HandleKept(ctx context.Context, id string, c order.Command, md Metadata, opts ...Option) (Result, error) {
	p := h.Plan(ctx, id, c, md, opts...)
	defer p.Close()
	h.carryOut(ctx, p)
	p.Keep()
	return p.Result, p.Err
}

// ForgetCached drops the cache of orders, and caches none after.
func (h *Handler) ForgetCached() {
	h.orderCache()
	h.orders = nil
}
