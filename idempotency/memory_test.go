package idempotency

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heapAfter returns how many bytes of heap fill leaves in use, after a collection each side.
func heapAfter(fill func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

// BenchmarkRememberedBytes compares what a remembered key is charged (remembered.size) with
// the heap it takes, for an answer as the API stores it (four headers, a small order's body):
//
//	go test -run '^$' -bench RememberedBytes -benchtime 20000x ./idempotency/
func BenchmarkRememberedBytes(b *testing.B) {
	c := newByteLRU(1 << 40)
	charged := 0.0
	heap := heapAfter(func() {
		i := 0
		for b.Loop() {
			stream := StreamName("shop-1", fmt.Sprint("key-", i))
			r := remembered{
				fingerprint: strings.Repeat(fmt.Sprintf("%x", i%16), 64),
				expiresAt:   time.Now(),
				outcome: Outcome{Status: 201, Body: strings.Repeat("x", 600), Headers: map[string]string{
					"Content-Type": "application/json", "Location": "/v1/orders/01KBRW0Z4E0C8AN6XKTRH4DW5Q",
					"ETag": `"0"`, "Log-Position": fmt.Sprint(1_000_000 + i),
				}},
			}
			charged += float64(r.size(stream))
			c.add(stream, r)
			i++
		}
	})
	runtime.KeepAlive(c)
	b.ReportMetric(heap/float64(b.N), "heap-B/key")
	b.ReportMetric(charged/float64(b.N), "charged-B/key")
}

// BenchmarkFingerprintsMemory reports the heap that a remembered fingerprint takes:
//
//	go test -run '^$' -bench FingerprintsMemory -benchtime 20000x ./idempotency/
func BenchmarkFingerprintsMemory(b *testing.B) {
	f := NewFingerprints(1 << 30)
	heap := heapAfter(func() {
		i := 0
		for b.Loop() {
			f.Of("POST", "/v1/orders", fmt.Appendf(nil, `{"customerId":"c-%d","currency":"EUR"}`, i))
			i++
		}
	})
	runtime.KeepAlive(f)
	b.ReportMetric(heap/float64(b.N), "heap-B/entry")
}
