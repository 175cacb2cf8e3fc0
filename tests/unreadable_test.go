package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/google/uuid"
)

// appendChained appends an event of type typ with data to the order's stream in the data
// directory dir (the server stopped), chained to the stream's last event as the handler
// chains its own: the chain stays intact, only the event is one the binary cannot read.
func appendChained(t *testing.T, dir, id, typ, data string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stream := command.StreamName(id)
	var last eventstore.RecordedEvent
	for e, err := range st.ReadStream(ctx, stream, eventstore.ReadStreamOptions{Direction: eventstore.Backwards, From: eventstore.End, Limit: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		last = e
	}
	prev := command.StoredHash(last.Metadata)
	m, err := json.Marshal(command.Metadata{Principal: "local", Command: "written-by-another-release", At: time.Now().UTC(), PrevHash: prev})
	if err != nil {
		t.Fatal(err)
	}
	hash := command.ChainHash(prev, stream, last.Revision+1, typ, []byte(data), m)
	meta := append([]byte(`{"hash":"`+hash+`",`), m[1:]...)
	ev := eventstore.EventData{ID: uuid.New(), Type: typ, Data: []byte(data), Metadata: meta}
	if _, err := st.Append(ctx, stream, eventstore.Exact(last.Revision), ev); err != nil {
		t.Fatal(err)
	}
}

// An event the binary cannot read (an unknown type, a newer version of a known type, an
// earlier version its upcaster refuses) is never skipped: reads and commands of its order
// answer event-unreadable naming the stream and revision, the orders projection stops and
// /readyz says so, and the audit lists each one.
func TestUnreadableEventsAreRefusedAndReported(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	unknown, _ := s.create(t, "unreadable-1", "c-unreadable-1")
	newer, _ := s.create(t, "unreadable-2", "c-unreadable-2")
	refused, _ := s.create(t, "unreadable-3", "c-unreadable-3")
	fine, _ := s.create(t, "unreadable-4", "c-unreadable-4")
	s.current().stop(t)
	at := `"at":"2026-12-01T10:00:00Z"`
	appendChained(t, s.dir, unknown, "order.teleported.v1", `{`+at+`}`)
	appendChained(t, s.dir, newer, "order.line-added.v3", `{"sku":"x","quantity":1,"unitPrice":{"amount":1,"currency":"EUR"},`+at+`}`)
	appendChained(t, s.dir, refused, "order.created.v1", `{"customerId":"c","currency":"EUR",`+at+`}`)
	s.restart(t)

	cases := []struct{ id, says string }{
		{unknown, "unknown order event type"},
		{newer, "newer version"},
		{refused, "cannot upcast order event order.created.v1: no orderId"},
	}
	for _, c := range cases {
		where := command.StreamName(c.id) + "@2"
		for _, r := range []*response{
			s.do(t, "GET", "/v1/orders/"+c.id+"/state?revision=2", "", nil),
			s.do(t, "GET", "/v1/orders/"+c.id+"/events", "", nil),
			s.do(t, "POST", "/v1/orders/"+c.id+"/cancel", "unreadable-cancel-"+c.id, map[string]any{"reason": "r"}),
		} {
			checkProblem(t, r, http.StatusInternalServerError, "event-unreadable")
			if d := r.str("detail"); !strings.Contains(d, where) || !strings.Contains(d, c.says) {
				t.Errorf("%v: the detail does not name %s and say %q", r, where, c.says)
			}
		}
	}
	if o := s.do(t, "GET", "/v1/orders/"+fine+"/state?revision=1", "", nil); o.status != http.StatusOK {
		t.Errorf("the state of an order without unreadable events: %v", o)
	}

	// The orders projection stops at the first one, in the log's order; nothing is skipped.
	first := command.StreamName(unknown) + "@2: "
	var ready *response
	stopped := eventually(30*time.Second, func() bool {
		ready = s.do(t, "GET", "/readyz", "", nil)
		return ready.status == http.StatusServiceUnavailable && strings.Contains(ready.str("detail"), "projection orders failed")
	})
	if !stopped || !strings.Contains(ready.str("detail"), first) {
		t.Errorf("/readyz: %v; want 503 naming the orders projection and the first unreadable event", ready)
	}
	r := s.do(t, "GET", "/v1/orders/"+fine, "", nil)
	checkProblem(t, r, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(r.str("detail"), "orders is stopped: ") || !strings.Contains(r.str("detail"), first) {
		t.Errorf("%v: a read of the stopped read model does not say why", r)
	}
	s.current().stop(t)

	out, code := runAPI(t, "audit", "verify", "--data", s.dir)
	if code == 0 {
		t.Errorf("audit verify of a log with unreadable events exits 0:\n%s", out)
	}
	for _, c := range cases {
		if want := "unreadable " + command.StreamName(c.id) + "@2"; !strings.Contains(out, want) {
			t.Errorf("audit verify does not list %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "tampered") || strings.Contains(out, "broken-link") {
		t.Errorf("audit verify finds the chain broken; the events were chained:\n%s", out)
	}
}
