package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/keyed"
)

// keyedCreate is a keyed create as an intake gives it to the pipeline; renders counts the
// answers it rendered.
func keyedCreate(fingerprint string, renders *atomic.Int32) keyed.OrderCommand {
	return keyed.OrderCommand{
		Command: order.CreateOrder{CustomerID: "c-" + fingerprint, Currency: "EUR",
			Lines: []order.AddLine{{SKU: "sku-1", Quantity: 1, UnitPrice: order.Money{Amount: 100, Currency: "EUR"}}}},
		Metadata: command.Metadata{Principal: "shop-1", IdempotencyKey: "k1", Fingerprint: fingerprint},
		Create:   true,
		Render: func(orderID string, res command.Result, err error) idempotency.Outcome {
			renders.Add(1)
			if err != nil {
				return idempotency.Outcome{Status: 500, Body: err.Error() + "\n"}
			}
			return idempotency.Outcome{Status: 201, Body: fmt.Sprintf("%s at %d\n", orderID, res.Revision), Position: res.Position.Commit}
		},
	}
}

func newPipeline(t *testing.T) (*keyed.Pipeline, *clock, eventstore.Store) {
	keys, clk, s := newKeys(t)
	return &keyed.Pipeline{Keys: keys, Orders: &command.Handler{Store: s, Now: clk.Now}}, clk, s
}

func orderEvents(t *testing.T, s eventstore.Store, id string) int {
	t.Helper()
	return eventstoretest.StreamLen(t, s, command.StreamName(id))
}

func TestPipelineRunsOnceAndReplaysTheFirstAnswer(t *testing.T) {
	p, _, s := newPipeline(t)
	ctx := context.Background()
	var renders atomic.Int32
	var first keyed.Answer
	for i := range 3 {
		ans, err := p.Do(ctx, request("fp"), keyed.Ready(keyedCreate("fp", &renders)))
		if err != nil || ans.Outcome.Status != 201 || ans.Replayed != (i > 0) || i > 0 && ans.Outcome.Body != first.Outcome.Body {
			t.Fatalf("Do %d: %+v, %v", i, ans, err)
		}
		if i == 0 {
			first = ans
		}
	}
	if n := orderEvents(t, s, "order-fp"); n != 2 {
		t.Errorf("the order has %d events, want the create's 2", n)
	}
	if n := renders.Load(); n != 1 {
		t.Errorf("%d answers rendered, want 1", n)
	}
	if _, err := p.Do(ctx, request("other"), keyed.Ready(keyedCreate("other", &renders))); !errors.Is(err, fault.KeyReused) {
		t.Errorf("another request with the key: %v, want fault.KeyReused", err)
	}
}

// A key this process does not know is claimed along with the command; when the store refuses
// that claim because another process completed the key, the run wrote nothing and the first
// answer is replayed.
func TestPipelineReplaysWhenTheClaimIsRefused(t *testing.T) {
	p, clk, s := newPipeline(t)
	ctx := context.Background()
	var renders atomic.Int32
	first, err := p.Do(ctx, request("fp"), keyed.Ready(keyedCreate("fp", &renders)))
	if err != nil {
		t.Fatal(err)
	}
	other := &keyed.Pipeline{Keys: &idempotency.Keys{Store: s, TTL: p.Keys.TTL, Lease: p.Keys.Lease, Wait: p.Keys.Wait, Now: clk.Now},
		Orders: &command.Handler{Store: s, Now: clk.Now}}
	r := request("fp")
	r.OrderID = "order-drawn-again" // the other process draws another id for the create
	ans, err := other.Do(ctx, r, keyed.Ready(keyedCreate("fp", &renders)))
	if err != nil || !ans.Replayed || ans.Outcome.Body != first.Outcome.Body {
		t.Fatalf("Do on the other process: %+v, %v; want the first answer replayed", ans, err)
	}
	if n := orderEvents(t, s, "order-drawn-again"); n != 0 {
		t.Errorf("the refused run wrote %d events of its order", n)
	}
}

// unavailableOnce refuses its first append to an order's stream as unavailable. It appends one
// stream at a time, as KurrentDB does, so the pipeline writes the key's claim first; it keeps
// no stream's age, which these tests do not reach.
type unavailableOnce struct {
	eventstore.Store
	failed atomic.Bool
}

func (u *unavailableOnce) SetMaxAge(context.Context, string, time.Duration) error { return nil }

func (u *unavailableOnce) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == command.StreamName("order-fp") && u.failed.CompareAndSwap(false, true) {
		return eventstore.AppendResult{}, fmt.Errorf("append: %w", eventstore.ErrUnavailable)
	}
	return u.Store.Append(ctx, stream, expected, events...)
}

// An answer not kept (a 5xx) lets the key go: the next request with it runs the command.
func TestPipelineLetsTheKeyGoOfAnAnswerNotKept(t *testing.T) {
	p, _, s := newPipeline(t)
	u := &unavailableOnce{Store: s} // appends one stream at a time, and fails once
	p.Orders.Store, p.Keys.Store = u, u
	ctx := context.Background()
	var renders atomic.Int32
	if ans, err := p.Do(ctx, request("fp"), keyed.Ready(keyedCreate("fp", &renders))); err != nil || ans.Outcome.Status != 500 {
		t.Fatalf("first Do: %+v, %v; want the store's 500", ans, err)
	}
	if ans, err := p.Do(ctx, request("fp"), keyed.Ready(keyedCreate("fp", &renders))); err != nil || ans.Replayed || ans.Outcome.Status != 201 {
		t.Fatalf("second Do: %+v, %v; want the command run again", ans, err)
	}
}

// A keyed command on an existing order, on a store that appends to several streams at once,
// records its key's claim and outcome in one event, written with the command's events: the
// answer is recorded once it is given, and another process replays it.
func TestPipelineRecordsACommandsOutcomeWithItsEvents(t *testing.T) {
	p, clk, s := newPipeline(t)
	ctx := context.Background()
	var renders atomic.Int32
	create, createCmd := request("fp"), keyedCreate("fp", &renders)
	create.Key, createCmd.Metadata.IdempotencyKey = "create", "create"
	if _, err := p.Do(ctx, create, keyed.Ready(createCmd)); err != nil {
		t.Fatal(err)
	}
	add := keyedCreate("fp", &renders)
	add.Create = false
	add.Command = order.AddLine{SKU: "sku-2", Quantity: 1, UnitPrice: order.Money{Amount: 50, Currency: "EUR"}}
	ans, err := p.Do(ctx, request("fp"), keyed.Ready(add))
	if err != nil || ans.Replayed || ans.Outcome.Status != 201 {
		t.Fatalf("Do: %+v, %v", ans, err)
	}
	if types := keyEvents(t, s, request("fp")); !slices.Equal(types, []string{idempotency.TypeRecorded}) {
		t.Fatalf("key stream %v, want one %s", types, idempotency.TypeRecorded)
	}
	other := &idempotency.Keys{Store: s, TTL: p.Keys.TTL, Lease: p.Keys.Lease, Wait: p.Keys.Wait, Now: clk.Now}
	again := request("fp")
	again.ReadFirst = true
	_, replay, err := other.Begin(ctx, again)
	if err != nil || replay == nil || !reflect.DeepEqual(*replay, ans.Outcome) {
		t.Fatalf("another process: %+v, %v; want the outcome answered, %+v", replay, err, ans.Outcome)
	}
}

// A run that panics gives its key up: the next request with it runs the command at once.
func TestPipelineReleasesTheKeyOfARunThatPanics(t *testing.T) {
	p, _, _ := newPipeline(t)
	ctx := context.Background()
	var renders atomic.Int32
	panicking := keyedCreate("fp", &renders)
	panicking.Render = func(string, command.Result, error) idempotency.Outcome { panic("the command failed") }
	func() {
		defer func() { _ = recover() }()
		p.Do(ctx, request("fp"), keyed.Ready(panicking))
	}()
	ans, err := p.Do(ctx, request("fp"), keyed.Ready(keyedCreate("fp", &renders)))
	if err != nil || ans.Replayed || ans.Outcome.Status != 201 {
		t.Fatalf("Do after a panic: %+v, %v; want the command run at once", ans, err)
	}
}

// failingWrites refuses every append as unavailable.
type failingWrites struct{ *sqlite.Store }

func (f failingWrites) MultiStreamAppend(context.Context, ...eventstore.StreamAppend) ([]eventstore.AppendResult, error) {
	return nil, fmt.Errorf("append: %w", eventstore.ErrUnavailable)
}

// A final answer whose record alone cannot be written is not given: Do returns the store's
// error, once, and the key is let go.
func TestPipelineAnswerWhoseRecordFailsIsNotGiven(t *testing.T) {
	p, _, s := newPipeline(t)
	p.Keys.Store = failingWrites{s.(*sqlite.Store)}
	var renders atomic.Int32
	add := keyedCreate("fp", &renders)
	add.Create = false
	add.Command = order.AddLine{SKU: "sku-2", Quantity: 1, UnitPrice: order.Money{Amount: 50, Currency: "EUR"}}
	if _, err := p.Do(context.Background(), request("fp"), keyed.Ready(add)); !errors.Is(err, eventstore.ErrUnavailable) {
		t.Fatalf("Do on a store that refuses the record of a missing order's refusal: %v; want ErrUnavailable", err)
	}
	p.Keys.Store = s
	if ans, err := p.Do(context.Background(), request("fp"), keyed.Ready(add)); err != nil || ans.Replayed || ans.Outcome.Status != 500 {
		t.Fatalf("Do once the store writes: %+v, %v; want the command run, not a replay", ans, err)
	}
}
