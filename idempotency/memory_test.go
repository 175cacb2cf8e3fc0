package idempotency

import (
	"fmt"
	"reflect"
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
	c := newMemo(1 << 40)
	charged := 0.0
	heap := heapAfter(func() {
		i := 0
		for b.Loop() {
			stream := StreamName("shop-1", fmt.Sprint("key-", i))
			r, _ := pack(strings.Repeat(fmt.Sprintf("%x", i%16), 64), time.Now(),
				Outcome{Status: 201, Body: strings.Repeat("x", 600), Headers: map[string]string{
					"Content-Type": "application/json", "Location": "/v1/orders/01KBRW0Z4E0C8AN6XKTRH4DW5Q",
					"ETag": `"0"`, "Log-Position": fmt.Sprint(1_000_000 + i),
				}})
			charged += float64(r.size())
			c.add(keyOf(stream), r)
			i++
		}
	})
	runtime.KeepAlive(c)
	b.ReportMetric(heap/float64(b.N), "heap-B/key")
	b.ReportMetric(charged/float64(b.N), "charged-B/key")
}

// TestRememberedOutcomeIsTheOneRecorded replays an outcome from its compact form in memory:
// status, problem code, every header and the body as recorded, and its fingerprint and expiry
// told apart from any other.
func TestRememberedOutcomeIsTheOneRecorded(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	expires := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	want := Outcome{Status: 409, Code: "order-conflict", Body: "{\"a\":\"\\u0000\"}\n", Headers: map[string]string{
		"Content-Type": "application/problem+json", "Retry-After": "1", "ETag": `"3"`, "X-Empty": "",
	}}
	r, ok := pack(fp, expires, want)
	if !ok {
		t.Fatal("not packed")
	}
	if got := *r.outcome(); !reflect.DeepEqual(got, want) {
		t.Errorf("outcome %+v, want %+v", got, want)
	}
	if !r.is(fp, expires) || r.is(strings.Repeat("ab", 31)+"ac", expires) || r.is(fp, expires.Add(1)) || r.is("fp", expires) {
		t.Error("fingerprint and expiry not told apart")
	}
	if bare, _ := pack("fp", expires, Outcome{Status: 200}); bare.outcome().Headers != nil || !bare.is("fp", expires) {
		t.Errorf("an outcome without headers or a short fingerprint: %+v", bare)
	}
	if _, ok := pack(fp, expires, Outcome{Headers: map[string]string{"X": "a\x00b"}}); ok {
		t.Error("a header with a NUL packed")
	}
	if keyOf(StreamName("p", "k")) == keyOf(StreamName("p", "l")) || keyOf("other") == keyOf("other2") {
		t.Error("two streams share a memory key")
	}
}
