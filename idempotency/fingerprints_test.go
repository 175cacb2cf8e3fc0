package idempotency_test

import (
	"testing"

	"github.com/acme/orders/idempotency"
)

// A digest tells apart any two requests whose bytes differ, even where method, path and body
// joined would read the same.
func TestDigestTellsRequestsApart(t *testing.T) {
	requests := [][3]string{
		{"POST", "/v1/orders", `{"b":1,"a":[1,2]}`},
		{"POST", "/v1/orders", `{"a":[1,2],"b":1}`},
		{"POST", "/v1/orders/x/lines", `{"b":1,"a":[1,2]}`},
		{"POST", "/v1/orders", ``},
		{"POST", "/v1/orders\n", `{"b":1,"a":[1,2]}`},
		{"POST", "/v1/orders", "\n{\"b\":1,\"a\":[1,2]}"},
		{"POST", "/v1/orders/", `x`},
		{"POST", "/v1/orders", `/x`},
		{"PUT", "/v1/orders", ``},
	}
	seen := map[idempotency.Digest]int{}
	for i, r := range requests {
		d := idempotency.DigestOf(r[0], r[1], []byte(r[2]))
		if d != idempotency.DigestOf(r[0], r[1], []byte(r[2])) {
			t.Errorf("request %d: two digests of the same bytes", i)
		}
		if j, ok := seen[d]; ok {
			t.Errorf("requests %d and %d share a digest", j, i)
		}
		seen[d] = i
	}
}
