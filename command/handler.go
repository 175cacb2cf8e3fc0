package command

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/acme/orders/fault"

	"github.com/acme/orders/bytecache"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
)

var (
	// ErrConflict: the order kept changing under the command; it was not applied.
	ErrConflict = fault.New(fault.Conflict, "", "order changed concurrently")
	// ErrPreconditionFailed: the order is not at the revision the request required (If-Match).
	ErrPreconditionFailed = fault.New(fault.PreconditionFailed, "", "order is not at the expected revision")
	// ErrNotOwner: the order was created by another principal, and only its creator commands it.
	ErrNotOwner = fault.New(fault.NotFound, "", "order belongs to another principal")
)

// StreamName is the event stream of the order with id.
func StreamName(id string) string { return "order-" + id }

// Handler runs commands. Its zero value is not usable: set Store.
type Handler struct {
	Store eventstore.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RetryFor bounds how long a command is decided again after another process changed its
	// order meanwhile; 0 means 2 seconds. Commands of this process on one order never refuse
	// each other: they run one after another. A negative RetryFor never retries.
	RetryFor time.Duration
	// CachedOrderBytes bounds the memory of the orders kept as last folded or written, so that
	// a command on one of them reads nothing before its append (see cachedOrder); 0 means
	// CachedOrdersDefault, a negative number none.
	CachedOrderBytes int64

	ordersOnce sync.Once
	orders     *bytecache.Cache[string, cachedOrder] // see orderCache

	queues queues
}

// Result is the outcome of a command.
type Result struct {
	State    order.State         // the order after the command
	Revision uint64              // of the order's last event (State.Version-1)
	Position eventstore.Position // of that event in the global log
	// Events are the events the command appended; none if it changed nothing.
	Events []order.Event
	// Repeated is set when the command's key was already in the order's stream: nothing was
	// run, and State, Revision and Position are those right after the key's events. A repeat
	// racing the first run may instead append the same event ids at the same revision, which
	// the store answers with the first run's result: where the store says so, or the order
	// was cached, the handler then answers from the stored events (Repeated); otherwise
	// Written is false.
	Repeated bool

	hash string          // the chain hash computed for the last event appended
	fate eventstore.Fate // what the store did with them
}

// Handle runs c on the order id, with opts. Amounts in c that name no currency are in the
// order's. It returns the domain's *order.Error when the command is refused; for a
// ConfirmPayment the order refuses but must record, it returns both a Result with the
// recorded events and the *order.Error. Other errors: ErrConflict, fault.KeyReused,
// ErrPreconditionFailed and the store's.
//
// Only the principal that created an order commands it: for any other (md.Principal), Handle
// returns ErrNotOwner and changes nothing.
//
// Commands on one order in this process run one after another (see queues); each turn loads
// the order, decides, and appends at the revision it loaded, and takes another turn when the
// store says the order moved meanwhile.
func (h *Handler) Handle(ctx context.Context, id string, c order.Command, md Metadata, opts ...Option) (Result, error) {
	p := h.Plan(ctx, id, c, md, opts...)
	defer p.Close()
	h.carryOut(ctx, p)
	return p.Result, p.Err
}

// carryOut makes p's appends and tells p what the store did, until p is done.
func (h *Handler) carryOut(ctx context.Context, p *Plan) {
	for !p.Done() {
		results, err := eventstore.Write(ctx, h.Store, p.Appends...)
		p.Written(ctx, results, err)
	}
}

// Option is a way a command runs besides the plain one.
type Option func(*options)

type options struct {
	at    []uint64 // the revisions the order may be at, if conditional
	cond  bool
	isNew bool
}

// At requires the order to be at one of revisions (If-Match): at any other revision, or if the
// order does not exist, the command returns ErrPreconditionFailed. With no revision, nothing
// meets it.
func At(revisions ...uint64) Option {
	return func(o *options) { o.at, o.cond = revisions, true }
}

// NewOrder says the order id was drawn for this very command (a create whose key was just
// claimed): its stream cannot exist, so the command is decided without reading it. Should it
// exist after all, the store refuses the append, or tells it is a repeat, and the command is
// decided again on the order read, as for a cached order that moved.
func NewOrder() Option { return func(o *options) { o.isNew = true } }

// mine reports whether the append that returned res wrote its events, rather than met those
// of an earlier append of the same ids: as the store says, or, if it cannot tell, as the
// last event stored says: its chain hash is the one computed for it.
func (h *Handler) mine(ctx context.Context, stream string, res Result) (bool, error) {
	switch res.fate {
	case eventstore.FateWritten:
		return true, nil
	case eventstore.FateRepeated:
		return false, nil
	}
	return h.readBack(ctx, stream, res)
}

// readBack is mine for a store that cannot tell: it reads the last event back. It is a function
// of its own because the loop's results live on the heap, which the store's word needs not.
func (h *Handler) readBack(ctx context.Context, stream string, res Result) (bool, error) {
	for e, err := range h.Store.ReadStream(ctx, stream, eventstore.ReadStreamOptions{From: res.Revision, Limit: 1}) {
		if err != nil {
			return false, fmt.Errorf("check append to %s: %w", stream, err)
		}
		return e.Revision == res.Revision && StoredHash(e.Metadata) == res.hash, nil
	}
	return false, nil
}

// Repeat is the answer to a command whose key's events are already in its order.
type Repeat struct {
	Result Result
	Err    error // the refusal the first run also returned, if it did
}

// Find looks for the events of md's key in the order id, without running c. It returns nil
// if the key has not taken effect there.
func (h *Handler) Find(ctx context.Context, id string, c order.Command, md Metadata) (*Repeat, error) {
	md.Command = c.CommandName()
	o, err := h.Load(ctx, id, md.Principal, md.IdempotencyKey)
	if err != nil || o.Key == nil {
		return nil, err
	}
	res, err := repeated(id, o.Key, md)
	return &Repeat{Result: res, Err: err}, nil
}

// repeated answers a command whose key's events are already in the order, as the first run did.
func repeated(id string, k *KeyEvents, md Metadata) (Result, error) {
	if k.Fingerprint != md.Fingerprint || k.Command != md.Command {
		return Result{}, fmt.Errorf("%s on order %s: %w", md.Command, id, fault.KeyReused)
	}
	res := Result{State: k.State, Revision: k.Revision, Position: k.Position, Repeated: true}
	for _, e := range k.Events {
		// The first run was refused while recording the charge, or the provider's event: refuse
		// again.
		switch e := e.(type) {
		case order.DuplicateChargeRecorded:
			return res, &order.Error{Kind: order.KindRejected, State: k.State.Status, Command: md.Command,
				Msg: fmt.Sprintf("payment %s was not accepted (%s); the charge is recorded for refund", e.PaymentID, e.Reason)}
		case order.ProviderEventUnapplied:
			return res, &order.Error{Kind: order.KindRejected, State: k.State.Status, Command: md.Command, Msg: e.Reason}
		}
	}
	return res, nil
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Written reports whether the events of res are known to be the ones this command wrote and the
// store holds: the store said so, or the stored events were read back. A Result with events
// that is not Written may carry a state decided by this run while the store holds another
// run's events of the same key.
func (r Result) Written() bool { return r.fate == eventstore.FateWritten }

// backoff sleeps a jittered, growing while (up to 128 ms) before attempt+1.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 7)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
