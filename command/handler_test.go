package command_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/fault"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func eur(minor int64) order.Money { return order.Money{Amount: minor, Currency: "EUR"} }

// newHandler returns a handler on a fresh embedded store.
func newHandler(t testing.TB) (*command.Handler, *sqlite.Store) {
	t.Helper()
	s, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &command.Handler{Store: s, Now: func() time.Time { return t0 }}, s
}

func create(id string) order.CreateOrder {
	return order.CreateOrder{OrderID: id, CustomerID: "cust-1", Currency: "EUR",
		Lines: []order.AddLine{{SKU: "sku-1", Quantity: 2, UnitPrice: eur(1000)}}}
}

func keyed(key, fingerprint string) command.Metadata {
	return command.Metadata{Principal: "shop-1", IdempotencyKey: key, Fingerprint: fingerprint, CorrelationID: "corr-" + key}
}

func streamEvents(t *testing.T, s eventstore.Store, id string) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	for e, err := range s.ReadStream(context.Background(), command.StreamName(id), eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestHandleAppendsWithMetadata(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	res, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.State.Status != order.StatusCreated || res.State.Total != eur(2000) || res.Revision != 1 || len(res.Events) != 2 || res.Repeated {
		t.Fatalf("create: got %+v", res)
	}
	events := streamEvents(t, s, "o1")
	if len(events) != 2 || events[1].Position != res.Position {
		t.Fatalf("stream holds %d events, last at %v; result says %v", len(events), events[len(events)-1].Position, res.Position)
	}
	var md command.Metadata
	if err := json.Unmarshal(events[0].Metadata, &md); err != nil {
		t.Fatal(err)
	}
	want := command.Metadata{Principal: "shop-1", IdempotencyKey: "k1", Fingerprint: "fp1", CorrelationID: "corr-k1", Command: "create-order", At: t0, PrevHash: command.Genesis}
	if diff := cmp.Diff(want, md); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}

	res, err = h.Handle(ctx, "o1", order.StartPayment{PaymentID: "pay-1", Amount: eur(2000)}, keyed("k2", "fp2"))
	if err != nil || res.State.Status != order.StatusPaying || res.Revision != 2 {
		t.Fatalf("start payment: %+v, %v", res, err)
	}
}

func TestHandleRepeatedKeyIsAnsweredFromTheStream(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	first, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatal(err)
	}
	h.Handle(ctx, "o1", order.AddLine{SKU: "sku-2", Quantity: 1, UnitPrice: eur(5)}, keyed("k2", "fp2"))

	again, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if !again.Repeated || again.Revision != first.Revision || again.Position != first.Position || again.State.Total != first.State.Total {
		t.Fatalf("repeat answered %+v, first run was %+v", again, first)
	}
	if n := len(streamEvents(t, s, "o1")); n != 3 {
		t.Fatalf("stream holds %d events after a repeat, want 3", n)
	}

	// Same key, other request: refused, not run.
	_, err = h.Handle(ctx, "o1", order.Cancel{Reason: "changed my mind"}, keyed("k1", "fp-other"))
	if !errors.Is(err, fault.KeyReused) {
		t.Fatalf("key reused for another request: got %v, want ErrKeyReused", err)
	}
}

// lossyStore loses the answer to the first append that succeeds, as a timed-out client would.
type lossyStore struct {
	eventstore.Store
	once sync.Once
}

var errLost = errors.New("connection reset")

func (l *lossyStore) Append(ctx context.Context, stream string, exp eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	res, err := l.Store.Append(ctx, stream, exp, events...)
	lost := false
	l.once.Do(func() { lost = err == nil })
	if lost {
		return eventstore.AppendResult{}, errLost
	}
	return res, err
}

func TestHandleRetryAfterLostAnswerDoesNotRunTwice(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, "o1", order.StartPayment{PaymentID: "pay-1", Amount: eur(2000)}, keyed("k2", "fp2")); err != nil {
		t.Fatal(err)
	}
	lossy := &command.Handler{Store: &lossyStore{Store: s}, Now: h.Now}
	confirm := order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(2000)}
	if _, err := lossy.Handle(ctx, "o1", confirm, keyed("k3", "fp3")); !errors.Is(err, errLost) {
		t.Fatalf("first confirm: got %v, want the lost answer", err)
	}
	res, err := lossy.Handle(ctx, "o1", confirm, keyed("k3", "fp3"))
	if err != nil || !res.Repeated || res.State.Status != order.StatusPaid {
		t.Fatalf("retried confirm: %+v, %v", res, err)
	}
	if n := len(streamEvents(t, s, "o1")); n != 4 {
		t.Fatalf("stream holds %d events, want 4 (created, line, payment started, confirmed once)", n)
	}
}

func TestHandleConcurrentCommandsAllApply(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", create("o1"), keyed("k0", "fp0")); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c := order.AddLine{SKU: fmt.Sprintf("sku-x%d", i), Quantity: 1, UnitPrice: eur(100)}
			_, err := h.Handle(ctx, "o1", c, keyed(fmt.Sprint("add-", i), "fp"))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	o, err := h.Load(ctx, "o1", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.State.Lines) != n+1 || o.State.Total != eur(2000+n*100) {
		t.Fatalf("after %d concurrent adds: %d lines, total %v", n, len(o.State.Lines), o.State.Total)
	}
	if got := len(streamEvents(t, s, "o1")); got != n+2 {
		t.Fatalf("stream holds %d events, want %d", got, n+2)
	}
}

// racingStore appends a competing event before every append it forwards.
type racingStore struct {
	eventstore.Store
}

func (r racingStore) Append(ctx context.Context, stream string, exp eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	body, _ := json.Marshal(order.LineAdded{SKU: fmt.Sprint("race-", time.Now().UnixNano()), Quantity: 1, UnitPrice: eur(1)})
	meta, _ := json.Marshal(command.Metadata{Command: "add-line"})
	ev := eventstore.EventData{ID: uuid.New(), Type: "order.line-added.v1", Data: body, Metadata: meta}
	if _, err := r.Store.Append(ctx, stream, eventstore.Any, ev); err != nil {
		return eventstore.AppendResult{}, err
	}
	return r.Store.Append(ctx, stream, exp, events...)
}

func TestHandleGivesUpWithConflict(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", create("o1"), keyed("k0", "fp0")); err != nil {
		t.Fatal(err)
	}
	racing := &command.Handler{Store: racingStore{s}, Now: h.Now, RetryFor: 50 * time.Millisecond}
	_, err := racing.Handle(ctx, "o1", order.AddLine{SKU: "sku-9", Quantity: 1, UnitPrice: eur(1)}, keyed("k1", "fp1"))
	if !errors.Is(err, command.ErrConflict) || !errors.Is(err, eventstore.ErrWrongExpectedRevision) {
		t.Fatalf("got %v, want ErrConflict wrapping the wrong expected revision", err)
	}
	o, _ := h.Load(ctx, "o1", "shop-1", "k1")
	if o.Key != nil {
		t.Fatal("the conflicting command was applied")
	}
}

func TestHandleDuplicateChargeIsRecordedAndRefused(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	for i, c := range []order.Command{create("o1"), order.StartPayment{PaymentID: "pay-1", Amount: eur(2000)}, order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(2000)}} {
		if _, err := h.Handle(ctx, "o1", c, keyed(fmt.Sprint("k", i), "fp")); err != nil {
			t.Fatal(err)
		}
	}
	// The provider's callback for the same payment, again, without a key: a no-op.
	res, err := h.Handle(ctx, "o1", order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(2000)}, command.Metadata{Principal: "shop-1"})
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("same payment confirmed again: %+v, %v", res, err)
	}
	// Another payment for the same order: refused, and recorded for refund.
	second := order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(2000)}
	res, err = h.Handle(ctx, "o1", second, keyed("k9", "fp9"))
	if !errors.Is(err, order.KindRejected) || len(res.Events) != 1 || res.State.DuplicateCharges.Len() != 1 {
		t.Fatalf("second payment: %+v, %v", res, err)
	}
	// Its retry is refused the same way, and records nothing more.
	again, err := h.Handle(ctx, "o1", second, keyed("k9", "fp9"))
	if !errors.Is(err, order.KindRejected) || !again.Repeated {
		t.Fatalf("retried second payment: %+v, %v", again, err)
	}
	if n := len(streamEvents(t, s, "o1")); n != 5 {
		t.Fatalf("stream holds %d events, want 5", n)
	}
}

func TestHandleMissingOrder(t *testing.T) {
	h, _ := newHandler(t)
	_, err := h.Handle(context.Background(), "nope", order.Cancel{Reason: "r"}, command.Metadata{})
	if !errors.Is(err, order.KindNotFound) {
		t.Fatalf("got %v, want not found", err)
	}
}

// Only the principal that created an order commands it; another one's command, keyed or not,
// changes nothing, even with a key the creator used (keys are scoped to their principal).
func TestHandleRefusesAnotherPrincipal(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	created, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatal(err)
	}
	other := keyed("k1", "fp1")
	other.Principal = "shop-2"
	for _, md := range []command.Metadata{other, {Principal: "shop-2"}} {
		_, err := h.Handle(ctx, "o1", order.Cancel{Reason: "r"}, md)
		if !errors.Is(err, command.ErrNotOwner) {
			t.Fatalf("%+v: got %v, want ErrNotOwner", md, err)
		}
	}
	if n := len(streamEvents(t, s, "o1")); n != len(created.Events) {
		t.Fatalf("%d events, want only the creation's %d", n, len(created.Events))
	}
	if _, err := h.Handle(ctx, "o1", order.Cancel{Reason: "r"}, keyed("k2", "fp2")); err != nil {
		t.Fatalf("the creator's command: %v", err)
	}
	// The same key on another principal's own order is another key.
	c := create("o2")
	if res, err := h.Handle(ctx, "o2", c, other); err != nil || res.Repeated || len(res.Events) == 0 {
		t.Fatalf("another principal's k1 on its own order: %+v, %v", res, err)
	}
}

// Identical keyed commands racing on one order take effect once: the losers either find the
// key in the stream or append the same event ids at the same revision, which the store answers
// as a repeat with the winner's result.
func TestHandleSameKeyConcurrentlyTakesEffectOnce(t *testing.T) {
	h, s := newHandler(t)
	ctx := context.Background()
	if _, err := h.Handle(ctx, "o1", create("o1"), keyed("k0", "fp0")); err != nil {
		t.Fatal(err)
	}
	c := order.AddLine{SKU: "sku-2", Quantity: 3, UnitPrice: eur(7)}
	results := make(chan command.Result, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := h.Handle(ctx, "o1", c, keyed("k1", "fp1"))
			if err != nil {
				t.Error(err)
			}
			results <- res
		})
	}
	wg.Wait()
	close(results)
	events := streamEvents(t, s, "o1")
	if len(events) != 3 {
		t.Fatalf("stream holds %d events, want 3", len(events))
	}
	for res := range results {
		if res.Revision != 2 || res.Position != events[2].Position || res.State.Total != eur(2021) {
			t.Errorf("a caller got revision %d at %v with total %v; the one effect is revision 2 at %v, 2021 EUR",
				res.Revision, res.Position, res.State.Total, events[2].Position)
		}
	}
}

func TestHandleAtARevisionChecksIt(t *testing.T) {
	h, _ := newHandler(t)
	ctx := context.Background()
	res, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatal(err)
	}
	add := order.AddLine{SKU: "sku-2", Quantity: 1, UnitPrice: eur(5)}
	if _, err := h.Handle(ctx, "o1", add, keyed("k2", "fp2"), command.At(res.Revision+1)); !errors.Is(err, command.ErrPreconditionFailed) {
		t.Fatalf("stale revision: got %v, want ErrPreconditionFailed", err)
	}
	if _, err := h.Handle(ctx, "nope", add, keyed("k3", "fp3"), command.At(0)); !errors.Is(err, command.ErrPreconditionFailed) {
		t.Fatalf("missing order: got %v, want ErrPreconditionFailed", err)
	}
	got, err := h.Handle(ctx, "o1", add, keyed("k4", "fp4"), command.At(res.Revision))
	if err != nil || got.Revision != res.Revision+1 {
		t.Fatalf("current revision: %+v, %v", got, err)
	}
}

func TestFindReportsOnlyTakenEffect(t *testing.T) {
	h, _ := newHandler(t)
	ctx := context.Background()
	if rep, err := h.Find(ctx, "o1", create("o1"), keyed("k1", "fp1")); rep != nil || err != nil {
		t.Fatalf("before the command: %+v, %v", rep, err)
	}
	res, err := h.Handle(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Find(ctx, "o1", create("o1"), keyed("k1", "fp1"))
	if err != nil || rep == nil || rep.Err != nil || rep.Result.Position != res.Position || !rep.Result.Repeated {
		t.Fatalf("after the command: %+v, %v", rep, err)
	}
}

func TestClientReferenceIsUniquePerCustomer(t *testing.T) {
	h, _ := newHandler(t)
	ctx := context.Background()
	withRef := func(id, customer string) order.CreateOrder {
		c := create(id)
		c.CustomerID, c.ClientRef = customer, "cart-42"
		return c
	}
	if _, err := h.Handle(ctx, "o1", withRef("o1", "alice"), keyed("k1", "fp1")); err != nil {
		t.Fatal(err)
	}
	// The same create retried (its order id is fixed at claim time): fine.
	if _, err := h.Handle(ctx, "o1", withRef("o1", "alice"), keyed("k1", "fp1")); err != nil {
		t.Fatalf("retried create: %v", err)
	}
	if _, err := h.Handle(ctx, "o2", withRef("o2", "alice"), keyed("k2", "fp2")); !errors.Is(err, command.ErrClientRefTaken) {
		t.Fatalf("second order with alice's reference: got %v, want ErrClientRefTaken", err)
	}
	if o, _ := h.Load(ctx, "o2", "", ""); o.State.Version != 0 {
		t.Fatal("the refused order was created")
	}
	// Refused with the claim of its idempotency key along: that is not written either.
	claim := newAlong("claim-k2")
	_, err := handleWith(ctx, h, claim, "o2", withRef("o2", "alice"), keyed("k2", "fp2"), command.NewOrder())
	if !errors.Is(err, command.ErrClientRefTaken) || claim.made != nil {
		t.Fatalf("second order with a key claim along: got %v, made %v; want ErrClientRefTaken, nothing made", err, claim.made)
	}
	if _, err := h.Handle(ctx, "o3", withRef("o3", "bob"), keyed("k3", "fp3")); err != nil {
		t.Fatalf("bob's order with the same reference: %v", err)
	}
}

// along is an append made in one step with a command's own, as the keyed pipeline makes
// its key's record: what it was told of the plan, and what the store did with it.
type along struct {
	append  eventstore.StreamAppend
	decided *command.Result // the plan's result as decided, before its first write
	made    *eventstore.AppendResult
}

// handleWith runs c as Handle does, with a's append made in the same step as the plan's first
// write. A refusal of a's append ends it.
func handleWith(ctx context.Context, h *command.Handler, a *along, id string, c order.Command, md command.Metadata, opts ...command.Option) (command.Result, error) {
	p := h.Plan(ctx, id, c, md, opts...)
	defer p.Close()
	for !p.Done() {
		appends := p.Appends
		if a.made == nil {
			res := p.Result
			a.decided = &res
			appends = append([]eventstore.StreamAppend{a.append}, appends...)
		}
		results, err := eventstore.Write(ctx, h.Store, appends...)
		var wrong *eventstore.WrongExpectedRevisionError
		if errors.As(err, &wrong) && wrong.Stream == a.append.Stream {
			return command.Result{}, err
		}
		if err == nil && a.made == nil {
			a.made, results = &results[0], results[1:]
		}
		p.Written(ctx, results, err)
	}
	return p.Result, p.Err
}

func newAlong(stream string) *along {
	return &along{append: eventstore.StreamAppend{Stream: stream, Expected: eventstore.NoStream,
		Events: []eventstore.EventData{{ID: uuid.New(), Type: "claimed", Data: []byte(`{}`)}}}}
}

// singleStore hides the embedded store's multi-stream appends.
type singleStore struct{ eventstore.Store }

// An append along with the command's is made with it, all or nothing: in one step where the
// store can, first on a store that cannot. Written, what the plan decided is what it comes to
// but for its position, so that the append along may record its outcome.
func TestHandleAppendsTheKeyClaimWithTheEvents(t *testing.T) {
	ctx := context.Background()
	for _, multi := range []bool{true, false} {
		t.Run(map[bool]string{true: "OneStep", false: "AlongFirst"}[multi], func(t *testing.T) {
			h, s := newHandler(t)
			if !multi {
				h.Store = singleStore{s}
			}
			claim := newAlong("claim-1")
			res, err := handleWith(ctx, h, claim, "o1", create("o1"), keyed("k1", "fp1"), command.NewOrder())
			if err != nil {
				t.Fatal(err)
			}
			if claim.made == nil || claim.made.Revision != 0 || claim.made.Position.Compare(res.Position) >= 0 {
				t.Fatalf("along told %+v; want revision 0 before the order's event at %v", claim.made, res.Position)
			}
			if d := claim.decided; d == nil || d.Revision != res.Revision || !reflect.DeepEqual(d.State, res.State) || len(d.Events) != len(res.Events) {
				t.Fatalf("the plan was %+v; want sure of the result %+v but for its position", d, res)
			}
			if evs := streamEvents(t, s, "o1"); len(evs) != len(res.Events) || len(evs) == 0 || !res.Written() {
				t.Fatalf("order stream has %d events, written %v; want the command's %d, written", len(evs), res.Written(), len(res.Events))
			}
			// A command whose along is refused is refused with it, at once, and writes nothing.
			again := newAlong("claim-1")
			_, err = handleWith(ctx, h, again, "o2", create("o2"), keyed("k2", "fp2"), command.NewOrder())
			var wrong *eventstore.WrongExpectedRevisionError
			if !errors.As(err, &wrong) || wrong.Stream != "claim-1" || again.made != nil {
				t.Fatalf("a refused along: %v, made %v; want the refusal of claim-1", err, again.made)
			}
			for _, err := range s.ReadStream(ctx, command.StreamName("o2"), eventstore.ReadStreamOptions{}) {
				if !errors.Is(err, eventstore.ErrStreamNotFound) {
					t.Fatalf("order o2: %v; want it not written", err)
				}
			}
		})
	}
}
