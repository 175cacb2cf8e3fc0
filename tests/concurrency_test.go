package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// outcome is what one of many concurrent senders ended with.
type outcome struct {
	req      request
	res      *response
	inFlight int // 409 idempotency-key-in-flight answers met on the way
	err      error
}

// concurrently sends n requests at once (made by mk), each retried while in flight, and
// returns their outcomes in order.
func (s *server) concurrently(t *testing.T, n int, mk func(i int) request) []outcome {
	t.Helper()
	out := make([]outcome, n)
	start := make(chan struct{})
	deadline := time.Now().Add(s.timeout())
	var wg sync.WaitGroup
	for i := range n {
		out[i].req = mk(i)
		wg.Go(func() {
			<-start
			out[i].res, out[i].inFlight, out[i].err = s.sendSettled(t, out[i].req, deadline)
		})
	}
	close(start)
	wg.Wait()
	waited := 0
	for _, o := range out {
		waited += o.inFlight
	}
	if waited > 0 {
		t.Logf("%d answers of 409 idempotency-key-in-flight, each retried until it replayed", waited)
	}
	return out
}

func TestConcurrentCreatesWithOneKey(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	const n = 200
	outs := s.concurrently(t, n, func(int) request {
		return request{method: "POST", path: "/v1/orders", key: "one-key-for-all", body: orderFor("c-herd")}
	})

	var first *response
	originals := 0
	for i, o := range outs {
		if o.err != nil {
			t.Errorf("request %d: %v", i, o.err)
			continue
		}
		if o.res.status != http.StatusCreated {
			t.Errorf("request %d: %v; want 201", i, o.res)
			continue
		}
		switch o.res.replayed() {
		case "":
			originals++
		case "true":
		default:
			t.Errorf("request %d: Idempotent-Replayed %q", i, o.res.replayed())
		}
		if first == nil {
			first = o.res
			continue
		}
		if !bytes.Equal(o.res.body, first.body) || o.res.header.Get("Location") != first.header.Get("Location") {
			t.Errorf("request %d got another order:\n%s (Location %s)\nwant\n%s (Location %s)",
				i, o.res.body, o.res.header.Get("Location"), first.body, first.header.Get("Location"))
		}
	}
	if originals != 1 {
		t.Errorf("%d responses without Idempotent-Replayed; want exactly 1 (the request that ran)", originals)
	}
	if first == nil {
		t.FailNow()
	}
	id := createdID(t, first)
	evs := s.events(t, id)
	if count(evs, "order.created.v2", "", "") != 1 || int64(len(evs)) != first.num("version") {
		t.Errorf("order %s has events %v; want one set: created and one line added", id, types(evs))
	}
}

// The story of seed 001: the provider's payment callback arrives many times at once, some
// deliveries retried with one key, others each with a fresh key; the order is paid once. A
// second payment for the paid order is refused and recorded once for refund.
func TestPaymentCallbackDeliveredManyTimes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "seed-create", "c-seed")
	s.command(t, id, "/payments", "seed-start", map[string]any{"paymentId": "pay-1", "amount": orderTotal})

	const n = 50
	outs := s.concurrently(t, n, func(i int) request {
		key := "callback-retried"
		if i%2 == 1 {
			key = fmt.Sprintf("callback-%02d", i)
		}
		return request{method: "POST", path: "/v1/orders/" + id + "/payments/pay-1/confirm", key: key, body: map[string]any{"amount": orderTotal}}
	})
	var sameKey *response
	for i, o := range outs {
		if o.err != nil {
			t.Errorf("delivery %d: %v", i, o.err)
			continue
		}
		if o.res.status != http.StatusOK || o.res.str("status") != "paid" || o.res.str("paymentId") != "pay-1" || o.res.num("paid") != orderTotal {
			t.Errorf("delivery %d (key %s): %v; want 200 with the order paid by pay-1", i, o.req.key, o.res)
			continue
		}
		if o.req.key == "callback-retried" {
			if sameKey == nil {
				sameKey = o.res
			} else if !bytes.Equal(o.res.body, sameKey.body) {
				t.Errorf("delivery %d with key callback-retried:\n%s\nwant the key's first answer\n%s", i, o.res.body, sameKey.body)
			}
		}
	}
	evs := s.events(t, id)
	if count(evs, "order.payment-confirmed.v1", "", "") != 1 || count(evs, "order.duplicate-charge-recorded.v1", "", "") != 0 {
		t.Fatalf("order %s has events %v; want one order.payment-confirmed.v1 and no duplicate charge", id, types(evs))
	}

	// Another payment for the paid order, delivered 10 times with fresh keys.
	outs = s.concurrently(t, 10, func(i int) request {
		return request{method: "POST", path: "/v1/orders/" + id + "/payments/pay-2/confirm",
			key: fmt.Sprintf("second-payment-%02d", i), body: map[string]any{"amount": orderTotal}}
	})
	for i, o := range outs {
		if o.err != nil {
			t.Errorf("delivery %d of pay-2: %v", i, o.err)
			continue
		}
		checkProblem(t, o.res, http.StatusUnprocessableEntity, "command-rejected")
	}
	evs = s.events(t, id)
	if count(evs, "order.duplicate-charge-recorded.v1", "paymentId", "pay-2") != 1 ||
		count(evs, "order.duplicate-charge-recorded.v1", "", "") != 1 ||
		count(evs, "order.payment-confirmed.v1", "", "") != 1 {
		t.Errorf("order %s has events %v; want pay-2 recorded once as a duplicate charge, pay-1 confirmed once", id, types(evs))
	}
	o := s.order(t, id)
	dups, _ := o.json["duplicateCharges"].([]any)
	if o.str("status") != "paid" || o.str("paymentId") != "pay-1" || len(dups) != 1 {
		t.Fatalf("%v; want paid by pay-1 with one duplicate charge", o)
	}
	dup, _ := dups[0].(map[string]any)
	if dup["paymentId"] != "pay-2" || jsonInt(dup["amount"]) != orderTotal || dup["reason"] != "already-paid" {
		t.Errorf("duplicate charge %v; want pay-2, %d, already-paid", dup, orderTotal)
	}
}

// addsAtOnce sends n adds of distinct lines to order id at once, each with its own key, the
// i-th to nodes[i%len(nodes)], and returns their responses.
func addsAtOnce(t *testing.T, nodes []*server, id string, n int) []outcome {
	t.Helper()
	outs := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		outs[i].req = request{method: "POST", path: "/v1/orders/" + id + "/lines", key: fmt.Sprint("add-line-", i),
			body: line{SKU: fmt.Sprint("sku-at-once-", i), Quantity: 1, UnitPrice: 100}}
		node := nodes[i%len(nodes)]
		wg.Go(func() {
			<-start
			outs[i].res, outs[i].err = node.send(t, outs[i].req)
		})
	}
	close(start)
	wg.Wait()
	return outs
}

// Commands on one order that reach one server at once run one after another there: none is
// refused because the others changed the order.
func TestConcurrentCommandsOnOneOrderAllSucceed(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	id, _ := s.create(t, "create-busy-order", "c-busy")
	const n = 40
	for i, o := range addsAtOnce(t, []*server{s}, id, n) {
		if o.err != nil || o.res.status != http.StatusOK {
			t.Errorf("add %d: %v %v; want 200", i, o.res, o.err)
		}
	}
	r := s.do(t, "GET", "/v1/orders/"+id, "", nil)
	if lines, _ := r.json["lines"].([]any); len(lines) != n+1 {
		t.Errorf("the order has %d lines after %d adds, want %d", len(lines), n, n+1)
	}
}
