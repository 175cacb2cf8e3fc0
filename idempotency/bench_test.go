package idempotency_test

import (
	"testing"

	"github.com/acme/orders/idempotency"
)

// benchBody is a create of two lines, as the load harness sends.
var benchBody = []byte(`{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`)

func BenchmarkFingerprint(b *testing.B) {
	for b.Loop() {
		idempotency.Fingerprint("POST", "/v1/orders", benchBody)
	}
}
