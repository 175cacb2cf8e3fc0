package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/eventstoretest"
	"github.com/acme/orders/eventstore/kurrent"
	"github.com/acme/orders/eventstore/kurrent/kurrenttest"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// backends open a store of each backend: the embedded one, and KurrentDB's through the test
// server, whose deletes are soft and whose revisions go on after a delete.
var backends = map[string]func(t *testing.T) eventstore.Store{
	"sqlite": func(t *testing.T) eventstore.Store { return openStore(t) },
	"kurrent": func(t *testing.T) eventstore.Store {
		srv, err := kurrenttest.Start("127.0.0.1:0", t.TempDir(), kurrenttest.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		store, err := kurrent.Open(kurrent.Config{URL: srv.URL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		return store
	},
}

// deadService is a Service over store keeping at most max events per dead-letter stream.
func deadService(store eventstore.Store, max int) *Service {
	cfg := DefaultConfig()
	cfg.SingleNode, cfg.MaxDeadLetters = true, max
	s := &Service{Store: store, Config: &cfg, Node: "n", Log: slog.New(slog.DiscardHandler)}
	s.Metrics = NewMetrics(prometheus.NewRegistry(), s)
	return s
}

func deadIDs(t *testing.T, s *Service, id string) string {
	t.Helper()
	dead, err := s.DeadLetters(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range dead {
		ids = append(ids, d.ID)
	}
	return strings.Join(ids, " ")
}

// The dead-letter stream holds at most Config.MaxDeadLetters events: past it the runner
// truncates it to its latest events, counts the dead letters dropped, and keeps a retry asked
// for before the truncation. The list and a retry by hand work on the truncated stream.
func TestDeadLettersAreBounded(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) { testDeadLettersAreBounded(t, open(t)) })
	}
}

func testDeadLettersAreBounded(t *testing.T, store eventstore.Store) {
	ctx := context.Background()
	s := deadService(store, 8)
	r := s.newRunner("we_x")
	r.held.Expected = eventstore.NoStream
	for i := range 20 {
		if err := s.deadLetter(ctx, "we_x", Delivery{ID: fmt.Sprintf("d%02d", i), OrderID: "o", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if i == 13 { // asked for, not yet taken by the runner, when the stream is truncated
			if err := s.Retry(ctx, "we_x", "d12", "admin"); err != nil {
				t.Fatal(err)
			}
		}
		r.deadAdded = true
		if err := r.boundDeadLetters(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if n := eventstoretest.StreamLen(t, store, deadPrefix+"we_x"); n > 8 {
			t.Fatalf("after dead letter %d the stream holds %d events", i, n)
		}
	}
	got := deadIDs(t, s, "we_x")
	if want := "d14 d15 d16 d17 d18 d19"; got != want {
		t.Errorf("dead letters %q, want %q", got, want)
	}
	var m dto.Metric
	if err := s.Metrics.dropped.Write(&m); err != nil {
		t.Fatal(err)
	}
	if dropped := m.GetCounter().GetValue(); dropped != 13 { // 20, less d12 retried, less the 6 kept
		t.Errorf("%v dead letters dropped, want 13", dropped)
	}
	if len(r.cp.Pending) != 1 || r.cp.Pending[0].ID != "d12" || !r.cp.Pending[0].Manual {
		t.Errorf("the retry asked for before the truncation: pending %+v", r.cp.Pending)
	}
	// A retry by hand after the truncation: of a dead letter kept, and of one dropped.
	if err := s.Retry(ctx, "we_x", "d15", "admin"); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(ctx, "we_x", "d02", "admin"); !errors.Is(err, ErrNotFound) {
		t.Errorf("retry of a dropped dead letter: %v", err)
	}
	r.deadPoll = time.Time{}
	if err := r.pollRetries(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(r.cp.Pending) != 2 || r.cp.Pending[1].ID != "d15" {
		t.Errorf("after a retry by hand: pending %+v", r.cp.Pending)
	}
	if got := deadIDs(t, s, "we_x"); got != "d14 d16 d17 d18 d19" {
		t.Errorf("dead letters after the retry: %q", got)
	}
}
