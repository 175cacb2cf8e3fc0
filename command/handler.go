package command

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/orders/fault"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	lru "github.com/hashicorp/golang-lru/v2"
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
	// Remember is how many orders are kept in memory as last folded or written, so that a
	// command on one of them reads nothing before its append (see recent); 0 means 10,000, a
	// negative number none.
	Remember int

	memoryOnce sync.Once
	recent     *lru.Cache[string, recent] // see memory
	rememberMu sync.Mutex

	queues queues

	// noLegacyRefs is set once the store is known to hold no legacy client-reference claim
	// (ScanLegacyClientRefs).
	noLegacyRefs atomic.Bool
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
	// was remembered, the handler then answers from the stored events (Repeated); otherwise
	// Written is false.
	Repeated bool

	settle func()          // remembers the order after a keyed append once its key's outcome is kept
	hash   string          // the chain hash computed for the last event appended
	fate   eventstore.Fate // what the store did with them
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
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	md.Command = c.CommandName()
	leave, err := h.queues.enter(ctx, id)
	if err != nil {
		return Result{}, err
	}
	defer leave()
	r := &run{h: h, id: id, stream: StreamName(id), c: c, md: md, opts: o,
		retryUntil: time.Now().Add(cmp.Or(h.RetryFor, 2*time.Second))}
	for attempt := 1; ; attempt++ {
		if res, again, err := r.turn(ctx, attempt); !again {
			if o.key != nil {
				// Only the final result's order may be remembered once the key is kept.
				o.key.OnKept(res.settle)
			}
			return res, err
		}
	}
}

// Option is a way a command runs besides the plain one.
type Option func(*options)

type options struct {
	at    *uint64
	isNew bool
	key   KeyClaim
}

// At requires the order to be at revision (If-Match): at any other revision, or if the order
// does not exist, the command returns ErrPreconditionFailed.
func At(revision uint64) Option { return func(o *options) { o.at = &revision } }

// NewOrder says the order id was drawn for this very command (a create whose key was just
// claimed): its stream cannot exist, so the command is decided without reading it. Should it
// exist after all, the store refuses the append, or tells it is a repeat, and the command is
// decided again on the order read, as for a remembered order that moved.
func NewOrder() Option { return func(o *options) { o.isNew = true } }

// WithKeyClaim runs the command under the claim of its idempotency key.
func WithKeyClaim(c KeyClaim) Option { return func(o *options) { o.key = c } }

// KeyClaim is the claim of the command's idempotency key (idempotency.Claim). If its append is
// still to be made, it is made with the command's events, all or nothing, where the store can
// append to several streams at once (eventstore.MultiStreamAppender); on another store it is
// appended first, on its own. If it is refused, so is the command: Handle returns its
// *WrongExpectedRevisionError, which names its stream, and has written nothing.
type KeyClaim interface {
	// Pending returns the append to make, or false once it is made. done is nil, or, for a
	// command that creates its order in the same step as that append, what the command comes
	// to: the append may then record the key's outcome too.
	Pending(done *Done) (eventstore.StreamAppend, bool)
	// Made is told the append's result once it is durable.
	Made(context.Context, eventstore.AppendResult)
	// OnKept is given what to do once the claim's outcome is recorded by a claim that no other
	// request ran: then the events of its key are this run's, and the order after them can be
	// remembered.
	OnKept(func())
}

// Done is what a command comes to, known before its append is made: its Result but for the
// Position, and the refusal it records, if any.
type Done struct {
	Result Result
	Err    error
}

// run is one command's way through Handle.
type run struct {
	h          *Handler
	id, stream string
	c          order.Command
	md         Metadata
	opts       options
	retryUntil time.Time
	claimed    bool // what the command claims (see claim) is claimed for its order already
}

// turn loads the order, decides and appends; again asks for another turn.
func (r *run) turn(ctx context.Context, attempt int) (res Result, again bool, err error) {
	o, remembered := Order{}, true // a new order, as if remembered: checked by the store
	if !r.opts.isNew || attempt > 1 {
		if o, remembered, err = r.h.current(ctx, r.id, r.md); err != nil {
			return Result{}, false, err
		}
	}
	if o.State.Version > 0 && o.Owner != r.md.Principal {
		return Result{}, false, fmt.Errorf("%s on order %s: %w", r.md.Command, r.id, ErrNotOwner)
	}
	if o.Key != nil {
		res, err := repeated(r.id, o.Key, r.md)
		return res, false, err
	}
	at := r.opts.at
	unmet := at != nil && (o.State.Version == 0 || o.Revision() != *at)
	var events []order.Event
	var decideErr error
	if !unmet {
		r.md.At = r.h.now()
		events, decideErr = order.Decide(o.State, order.InCurrency(r.c, o.State.Currency), r.md.At)
	}
	if len(events) == 0 {
		// An answer that appends nothing stands only on the order as it is in the store: a
		// remembered one is checked first, and read again if it moved.
		if remembered {
			same, err := r.h.unchanged(ctx, r.stream, o)
			if err != nil || !same {
				r.h.forget(r.stream, o.State.Version)
				return Result{}, err == nil, err
			}
		}
		if unmet {
			return Result{}, false, fmt.Errorf("%s on order %s: %w: want %d", r.md.Command, r.id, ErrPreconditionFailed, *at)
		}
		return Result{State: o.State, Revision: o.Revision(), Position: o.Position}, false, decideErr
	}
	res, again, err = r.write(ctx, attempt, o, events, decideErr)
	if err != nil || again {
		return res, again, err
	}
	return r.check(ctx, o, remembered, res, decideErr)
}

// write appends the decided events, with the command's claim if it makes one. A refused
// append names the stream that refused it: the order's moved (decide again, within the retry
// budget), the claim is held (by this order after all?), or the one along with them
// (returned as is).
func (r *run) write(ctx context.Context, attempt int, o Order, events []order.Event, decideErr error) (res Result, again bool, err error) {
	var claim *eventstore.StreamAppend
	if !r.claimed {
		if claim, err = r.h.claim(ctx, r.id, r.c, r.md); err != nil {
			return Result{}, false, err
		}
	}
	w := writing{md: r.md, along: r.opts.key, claim: claim, decideErr: decideErr,
		// An order drawn for this command: the store writes its events, or refuses them; no
		// other append can have written them first.
		sure: r.opts.isNew && o.State.Version == 0}
	res, err = r.h.append(ctx, r.id, o, events, w)
	if err != nil {
		r.h.forget(r.stream, o.State.Version)
	}
	wrong := (*eventstore.WrongExpectedRevisionError)(nil)
	switch {
	case !errors.As(err, &wrong):
		return res, false, err
	case wrong.Stream == r.stream && time.Now().Before(r.retryUntil):
		if err := backoff(ctx, attempt); err != nil {
			return Result{}, false, err
		}
		return Result{}, true, nil
	case wrong.Stream == r.stream:
		return Result{}, false, fmt.Errorf("%s on order %s after %d attempts: %w: %w", r.md.Command, r.id, attempt, ErrConflict, err)
	case claim != nil && wrong.Stream == claim.Stream:
		if err := r.h.claimHeld(ctx, r.id, r.c, claim.Stream); err != nil {
			return Result{}, false, err
		}
		r.claimed = true // a retried command
		return Result{}, true, nil
	}
	return Result{}, false, err
}

// check makes sure a keyed append wrote its events. The store answers an append of event ids
// it already holds at that revision with the first append's result: decided on a remembered
// order that missed them (another node, a key reused after it expired), or racing another run
// of the key (a takeover), this append may not be ours. The store says so if it can, else the
// stored events do; if they are another run's, the answer is theirs.
func (r *run) check(ctx context.Context, o Order, remembered bool, res Result, decideErr error) (Result, bool, error) {
	if r.md.IdempotencyKey == "" || (!remembered && res.fate != eventstore.FateRepeated) {
		return res, false, decideErr
	}
	mine, err := r.h.mine(ctx, r.stream, res)
	if err != nil {
		return Result{}, false, err
	}
	if mine {
		res.fate = eventstore.FateWritten
		return res, false, decideErr
	}
	r.h.forget(r.stream, o.State.Version)
	stored, err := r.h.Load(ctx, r.id, r.md.Principal, r.md.IdempotencyKey)
	if err != nil {
		return Result{}, false, err
	}
	if stored.Key != nil {
		res, err := repeated(r.id, stored.Key, r.md)
		return res, false, err
	}
	return Result{}, true, nil
}

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
		if dup, ok := e.(order.DuplicateChargeRecorded); ok {
			// The first run was refused while recording the charge: refuse again.
			return res, &order.Error{Kind: order.KindRejected, State: k.State.Status, Command: md.Command,
				Msg: fmt.Sprintf("payment %s was not accepted (%s); the charge is recorded for refund", dup.PaymentID, dup.Reason)}
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

// writing is what an append writes besides the order's events: the metadata they carry, the
// claim of the key they run under (along) and of what the command claims (claim).
type writing struct {
	md        Metadata
	along     KeyClaim
	claim     *eventstore.StreamAppend
	decideErr error // the refusal the events record, if any
	sure      bool  // the events will be this command's, if the store writes them at all
}

// append writes events to order id's stream after the revision o was loaded at. The order
// after it is remembered at once if the append cannot have been another's: the command is
// unkeyed, or the store says it wrote the events. Otherwise only when the key's claim is kept (KeyClaim.OnKept): no
// other run of its key could have appended the same events.
func (h *Handler) append(ctx context.Context, id string, o Order, events []order.Event, w writing) (Result, error) {
	md := w.md
	stream := StreamName(id)
	data := make([]eventstore.EventData, len(events))
	state := o.State
	prev := o.Hash
	if o.State.Version == 0 {
		prev = Genesis
	}
	for i, e := range events {
		typ, body, err := order.Marshal(e)
		if err != nil {
			return Result{}, fmt.Errorf("encode %T: %w", e, err)
		}
		meta, hash, err := chained(md, prev, stream, uint64(o.State.Version)+uint64(i), typ, body)
		if err != nil {
			return Result{}, err
		}
		data[i] = eventstore.EventData{ID: eventID(md, id, stream, i), Type: typ, Data: body, Metadata: meta}
		state, prev = order.Evolve(state, e), hash
	}
	var done *Done
	if w.sure {
		done = &Done{Result: Result{State: state, Revision: uint64(state.Version) - 1, Events: events}, Err: w.decideErr}
	}
	written, err := h.write(ctx, eventstore.StreamAppend{Stream: stream, Expected: o.expected(), Events: data}, w.along, done, w.claim)
	if err != nil {
		return Result{}, err
	}
	res := Result{State: state, Revision: written.Revision, Position: written.Position, Events: events, hash: prev, fate: written.Fate}
	// The order after the command can be remembered if every key applied to it is known.
	var keys map[string]struct{}
	if r, ok := h.recall(stream); ok && r.order.State.Version == o.State.Version {
		keys = r.keys
	} else if o.State.Version == 0 {
		keys = map[string]struct{}{}
	}
	if keys == nil {
		h.forget(stream, state.Version)
		return res, nil
	}
	owner := o.Owner
	if o.State.Version == 0 {
		owner = md.Principal
	}
	next := recent{order: Order{State: state, Position: written.Position, Hash: prev, Owner: owner}, keys: keys}.with(md)
	if md.IdempotencyKey == "" || written.Fate == eventstore.FateWritten {
		// Random event ids, or the store's word: this append is no other's repeat, so the
		// order remembered is the one stored.
		h.remember(stream, next)
		return res, nil
	}
	h.forget(stream, o.State.Version)
	res.settle = func() { h.remember(stream, next) }
	return res, nil
}

// write makes the command's append, with along's if it is pending and its claim if there is
// one: in one step where the store can, else those first, in that order. Along is told done
// only for a step of its own with the command's events: then it may record their outcome.
func (h *Handler) write(ctx context.Context, own eventstore.StreamAppend, along KeyClaim, done *Done, claim *eventstore.StreamAppend) (eventstore.AppendResult, error) {
	ms, multi := h.Store.(eventstore.MultiStreamAppender)
	if !multi {
		done = nil
	}
	var first []eventstore.StreamAppend
	alongAt := -1
	if along != nil {
		if a, ok := along.Pending(done); ok {
			alongAt, first = len(first), append(first, a)
		}
	}
	if claim != nil {
		first = append(first, *claim)
	}
	if multi && len(first) > 0 {
		results, err := ms.MultiStreamAppend(ctx, append(first, own)...)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if alongAt >= 0 {
			along.Made(ctx, results[alongAt])
		}
		return results[len(results)-1], nil
	}
	for i, a := range first {
		res, err := h.Store.Append(ctx, a.Stream, a.Expected, a.Events...)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if i == alongAt {
			along.Made(ctx, res)
		}
	}
	return h.Store.Append(ctx, own.Stream, own.Expected, own.Events...)
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
