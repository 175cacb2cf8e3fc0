package tests

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

// stormSize is how many requests with one key arrive at once: enough to collide on every step
// of the key's life, many more in the soak.
var stormSize = soakSize(64, 500)

// stormPatience bounds each request of the storm, and the server's reading of it.
const stormPatience = 2 * time.Minute

// A storm of stormSize concurrent requests with one Idempotency-Key, each retried while the
// server answers 409 in-flight: the command takes effect once, exactly one answer is the
// original, and every answer is identical to it, headers included.
//
// Patient: under -race on a small machine busy with other work, a few of 500 connections opened
// at once were closed without an answer (EOF; the server gives a request 10 s for its headers by
// default) and a few answers took longer than the tests' usual 30 s. The test is about what the
// answers are, not how soon they come, so the server and the clients wait up to stormPatience.
func TestDuplicateStorm(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--read-header-timeout", stormPatience.String(), "--read-timeout", stormPatience.String())
	s.patience = stormPatience
	for _, tc := range []struct {
		name   string
		status int
		req    func(t *testing.T) request
		// effect is the event the command appends to the order, once; keyed is how many
		// events the command appends in all.
		effect, field, value string
		keyed                int
	}{
		{
			name: "create", status: http.StatusCreated, effect: "order.created.v2", keyed: 2,
			req: func(*testing.T) request {
				return request{method: "POST", path: "/v1/orders", key: "storm-create", body: orderFor("c-storm")}
			},
		},
		{
			name: "add line", status: http.StatusOK, effect: "order.line-added.v2", field: "sku", value: "sku-storm", keyed: 1,
			req: func(t *testing.T) request {
				id, _ := s.create(t, "storm-setup", "c-storm-2")
				return request{method: "POST", path: "/v1/orders/" + id + "/lines", key: "storm-line", body: line{SKU: "sku-storm", Quantity: 3, UnitPrice: 700}}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req(t)
			outs := s.concurrently(t, stormSize, func(int) request { return req })
			var first *response
			originals := 0
			for _, o := range outs {
				if o.err != nil {
					t.Errorf("%v", o.err)
					continue
				}
				if o.res.replayed() != "true" {
					originals++
					first = o.res
				}
			}
			if originals != 1 {
				t.Fatalf("%d answers without Idempotent-Replayed: true; want exactly 1", originals)
			}
			wantStatus(t, first, tc.status)
			differ := 0
			for i, o := range outs {
				if o.err != nil || o.res == first {
					continue
				}
				if o.res.status != first.status || !bytes.Equal(o.res.body, first.body) ||
					o.res.header.Get("Location") != first.header.Get("Location") ||
					o.res.header.Get("ETag") != first.header.Get("ETag") ||
					o.res.header.Get("Log-Position") != first.header.Get("Log-Position") ||
					o.res.header.Get("Content-Type") != first.header.Get("Content-Type") {
					if differ++; differ <= 3 {
						t.Errorf("answer %d differs from the original:\n%v\nwant\n%v", i, o.res, first)
					}
				}
			}
			if differ > 0 {
				t.Errorf("%d of %d answers differ from the original", differ, stormSize)
			}

			id := first.str("id")
			evs := s.events(t, id)
			if n := count(evs, tc.effect, tc.field, tc.value); n != 1 {
				t.Errorf("order %s has %d %s events (%v); want 1", id, n, tc.effect, types(evs))
			}
			keyed := 0
			for _, e := range evs {
				if e.Metadata["idempotencyKey"] == req.key {
					keyed++
				}
			}
			if keyed != tc.keyed || int64(len(evs)) != first.num("version") {
				t.Errorf("order %s has events %v, %d of them with the storm's key, after the storm; want %d with it and version %d as answered",
					id, types(evs), keyed, tc.keyed, first.num("version"))
			}
		})
	}
}
