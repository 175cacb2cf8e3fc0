package projections_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
	"github.com/google/uuid"
)

// lockedBuffer is a log destination the runner writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two orders of one principal that started one payment id (possible only before payment ids
// were claimed): the lookup keeps leading to the first, which the later start never replaces,
// and says so in the log. The first order starting its id again is no conflict.
func TestPaymentLookupKeepsTheFirstOrder(t *testing.T) {
	s, db := open(t, t.TempDir())
	t.Cleanup(func() { db.Close(); s.Close() })
	ctx := context.Background()
	h := &command.Handler{Store: s}
	md := command.Metadata{Principal: "p"}
	for _, id := range []string{"o1", "o2"} {
		if _, err := h.Handle(ctx, id, order.CreateOrder{OrderID: id, CustomerID: "c1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "a", Quantity: 1, UnitPrice: eur(100)}}}, md); err != nil {
			t.Fatal(err)
		}
	}
	started := func(id string) {
		t.Helper()
		o, err := h.Load(ctx, id, "", "")
		if err != nil {
			t.Fatal(err)
		}
		typ, data, _ := order.Marshal(order.PaymentStarted{PaymentID: "pay-1", Amount: eur(100), At: time.Now()})
		if _, err := s.Append(ctx, command.StreamName(id), eventstore.Exact(o.Revision()),
			eventstore.EventData{ID: uuid.New(), Type: typ, Data: data, Metadata: []byte(`{"principal":"p","command":"start-payment"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	started("o1")
	if _, err := h.Handle(ctx, "o1", order.FailPayment{PaymentID: "pay-1", Reason: "declined"}, md); err != nil {
		t.Fatal(err)
	}
	started("o1")
	started("o2")

	var logged lockedBuffer
	r := &projections.Runner{DB: db, Feed: s, Projections: []projections.Projection{
		projections.Lookups{Log: slog.New(slog.NewTextHandler(&logged, nil))}}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	if err := r.WaitFor(wait, "lookups", head); err != nil {
		t.Fatal(err)
	}
	q := projections.Queries{DB: db}
	if id, ok, err := q.PaymentOrder(ctx, "p", "pay-1"); err != nil || !ok || id != "o1" {
		t.Fatalf("payment lookup: %q %v %v; want o1, the first order that started it", id, ok, err)
	}
	if got := strings.Count(logged.String(), "second_order=o2"); got != 1 {
		t.Errorf("the second order's start logged %d times, want once:\n%s", got, logged.String())
	}
}
