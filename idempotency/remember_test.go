package idempotency_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
)

// outcomeOf is an answer of n bytes, unique to key i.
func outcomeOf(i, n int) idempotency.Outcome {
	head := fmt.Sprintf("{\"key\":%d,\"pad\":\"", i)
	return idempotency.Outcome{
		Status:  200,
		Headers: map[string]string{"Content-Type": "application/json", "ETag": fmt.Sprintf("%q", fmt.Sprint(i)), "Log-Position": fmt.Sprint(1000 + i)},
		Body:    head + strings.Repeat("x", max(n-len(head)-3, 0)) + "\"}\n",
	}
}

// replayOf answers a retry of key as the API does: from memory if it can, else through Begin.
func replayOf(t *testing.T, keys *idempotency.Keys, key string) *idempotency.Outcome {
	t.Helper()
	ctx := context.Background()
	if out, ok, err := keys.Recall(ctx, "shop-1", key, "fp"); ok {
		if err != nil {
			t.Fatalf("recall %s: %v", key, err)
		}
		return out
	}
	r := request("fp")
	r.Key = key
	c, out, err := begin(ctx, keys, r)
	if err != nil || c != nil || out == nil {
		t.Fatalf("replay of %s: claim %+v, outcome %v, %v; want the outcome", key, c, out != nil, err)
	}
	return out
}

// The completed keys in memory never take more bytes than the budget, whatever the sizes of
// their answers, and every key, in memory, pushed out or too large to keep, is replayed byte
// for byte: the large ones and those pushed out from the store.
func TestRememberedBytesStayWithinTheBudget(t *testing.T) {
	keys, _, s := newKeys(t)
	counted := &countingStore{Store: s}
	const budget = 2 << 20
	keys.Store, keys.RememberBytes = counted, budget
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	const n = 300
	answers := make([]idempotency.Outcome, n)
	peak := int64(0)
	check := func(after string) {
		t.Helper()
		got := keys.RememberedBytes()
		if got > budget {
			t.Fatalf("after %s: %d bytes remembered; the budget is %d", after, got, budget)
		}
		peak = max(peak, got)
	}
	for i := range n {
		// 1 to 41 KiB: the memory keeps those under 28 KiB, a 64th of its budget for keys
		// completed here.
		answers[i] = outcomeOf(i, 1<<10+rnd.IntN(40<<10))
		r := request("fp")
		r.Key = fmt.Sprint("k", i)
		c, _, err := begin(ctx, keys, r)
		if err != nil || c == nil {
			t.Fatalf("claim k%d: %+v, %v", i, c, err)
		}
		if err := keys.Complete(ctx, c, answers[i]); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprint("completing k", i))
	}
	if peak < budget/2 {
		t.Fatalf("at most %d bytes remembered of %d: the memory was never filled", peak, budget)
	}
	reads := counted.reads.Load()
	for i := range n {
		out := replayOf(t, keys, fmt.Sprint("k", i))
		if out.Status != answers[i].Status || out.Body != answers[i].Body || fmt.Sprint(out.Headers) != fmt.Sprint(answers[i].Headers) {
			t.Fatalf("replay of k%d: %d %v, %d bytes; want %d %v, %d bytes, the same", i, out.Status, out.Headers, len(out.Body), answers[i].Status, answers[i].Headers, len(answers[i].Body))
		}
		check(fmt.Sprint("replaying k", i))
	}
	if counted.reads.Load() == reads {
		t.Error("every replay came from memory: none was pushed out or left in the store")
	}
}

// An answer too large to keep in memory is replayed from the store, with one read of the key
// and no claim; a key that the store holds anew since is left to Begin.
func TestLargeOutcomeIsReplayedFromTheStore(t *testing.T) {
	keys, clk, s := newKeys(t)
	counted := &countingStore{Store: s}
	keys.Store = counted
	ctx := context.Background()
	large := outcomeOf(1, 200<<10)
	table := keys.RememberedBytes() // the table of known keys, taken at once
	c, _, err := begin(ctx, keys, request("fp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Complete(ctx, c, large); err != nil {
		t.Fatal(err)
	}
	if got := keys.RememberedBytes() - table; got >= int64(len(large.Body)) {
		t.Errorf("%d bytes remembered after a %d-byte answer; want it left in the store", got, len(large.Body))
	}
	reads, appends := counted.reads.Load(), counted.appends.Load()
	out, ok, err := keys.Recall(ctx, "shop-1", "k1", "fp")
	if err != nil || !ok || out.Body != large.Body || out.Status != large.Status {
		t.Fatalf("Recall of the large answer: %v, %v; want it, byte for byte", ok, err)
	}
	if r, a := counted.reads.Load()-reads, counted.appends.Load()-appends; r != 1 || a != 0 {
		t.Errorf("its replay read the store %d times and appended %d; want one read, no append", r, a)
	}
	if _, _, err := keys.Recall(ctx, "shop-1", "k1", "other"); err != fault.KeyReused {
		t.Errorf("Recall with another fingerprint: %v; want ErrKeyReused", err)
	}

	clk.Add(time.Hour) // expired: Begin deletes it, and claims it anew
	again, _, err := begin(ctx, keys, request("fp"))
	if err != nil || again == nil {
		t.Fatalf("Begin after expiry: %+v, %v", again, err)
	}
	if _, ok, _ := keys.Recall(ctx, "shop-1", "k1", "fp"); ok {
		t.Error("Recall answered a key held anew, in flight")
	}
}

// BenchmarkRememberLargeOutcomes completes b.N keys with answers of 1.35 MB (an order with
// 8,000 duplicate charges) and reports the heap that stays after a collection, with the
// memory at its default budget:
//
//	go test -run '^$' -bench RememberLargeOutcomes -benchtime 1600x ./idempotency/
func BenchmarkRememberLargeOutcomes(b *testing.B) {
	s, err := sqlite.Open(b.TempDir(), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	keys := &idempotency.Keys{Store: s}
	ctx := context.Background()
	answer := outcomeOf(0, 1350<<10)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	i := 0
	for b.Loop() {
		r := request("fp")
		r.Key = fmt.Sprint("k", i)
		i++
		c, _, err := begin(ctx, keys, r)
		if err != nil {
			b.Fatal(err)
		}
		out := answer
		out.Body = strings.Clone(answer.Body) // each answer is a buffer of its own
		if err := keys.Complete(ctx, c, out); err != nil {
			b.Fatal(err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keys)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB")
	b.ReportMetric(float64(keys.RememberedBytes())/(1<<20), "remembered-MiB")
}

// TestReplayOfTheVeryBytes replays from memory a request whose bytes are those of the request
// that ran with the key, without its fingerprint; any other bytes, a key not completed here or
// one read back from the store are left to Recall and Begin.
func TestReplayOfTheVeryBytes(t *testing.T) {
	keys, clk, s := newKeys(t)
	ctx := context.Background()
	body := []byte(`{"customerId":"c-1"}`)
	r := request("fp")
	r.Digest = idempotency.DigestOf("POST", "/v1/orders", body)
	if _, ok := keys.RecallBytes(ctx, r.Principal, r.Key, r.Digest); ok {
		t.Fatal("a key not completed yet was replayed")
	}
	c, _, err := begin(ctx, keys, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Complete(ctx, c, created); err != nil {
		t.Fatal(err)
	}
	out, ok := keys.RecallBytes(ctx, r.Principal, r.Key, r.Digest)
	if !ok || !reflect.DeepEqual(*out, created) {
		t.Fatalf("replay of the very bytes: %+v, %v", out, ok)
	}
	for name, d := range map[string]idempotency.Digest{
		"other bytes": idempotency.DigestOf("POST", "/v1/orders", []byte(`{ "customerId": "c-1" }`)),
		"no digest":   {},
	} {
		if _, ok := keys.RecallBytes(ctx, r.Principal, r.Key, d); ok {
			t.Errorf("%s: replayed without a fingerprint", name)
		}
	}
	if _, ok := keys.RecallBytes(ctx, "shop-2", r.Key, r.Digest); ok {
		t.Error("another principal's key replayed")
	}

	node2 := &idempotency.Keys{Store: s, TTL: time.Hour, Now: clk.Now}
	if _, replay, err := begin(ctx, node2, request("fp")); err != nil || replay == nil {
		t.Fatalf("replay read from the store: %+v, %v", replay, err)
	}
	if _, ok := node2.RecallBytes(ctx, r.Principal, r.Key, r.Digest); ok {
		t.Error("a key read back from the store replayed by bytes it never saw")
	}
	clk.Add(time.Hour)
	if _, ok := keys.RecallBytes(ctx, r.Principal, r.Key, r.Digest); ok {
		t.Error("an expired key replayed")
	}
}
