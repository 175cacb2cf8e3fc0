package command

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/acme/orders/internal/jsontest"
	"github.com/google/uuid"
)

// chained stores what it always stored: the hash member, then the metadata as encoding/json
// writes it, hashed by the chain's definition.
func TestChainedIsTheChainsDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	strs := jsontest.Strings(r, 100)
	for i := range 500 {
		md := Metadata{Principal: strs[r.IntN(len(strs))], IdempotencyKey: strs[r.IntN(len(strs))], Command: "CreateOrder", At: time.Unix(int64(i)*7919, 5)}
		data := []byte(`{"orderId":"` + strconv.Itoa(i) + `","note":"` + strs[r.IntN(len(strs))] + `"}`)
		prev := Genesis
		if i%2 == 1 {
			prev = hex.EncodeToString(data[:min(len(data), 32)])
		}
		got, hash, err := chained(md, prev, "order-"+strconv.Itoa(i), uint64(i), "order.created.v1", data)
		if err != nil {
			t.Fatal(err)
		}
		md.PrevHash = prev
		m, _ := json.Marshal(md)
		want := referenceChainHash(prev, "order-"+strconv.Itoa(i), uint64(i), "order.created.v1", data, m)
		if hash != want || string(got) != `{"hash":"`+want+`",`+string(m[1:]) {
			t.Fatalf("chained = %s, %s; want hash %s over %s", got, hash, want, m)
		}
	}
}

// referenceChainHash is the chain's definition (see chain.go) as first written.
func referenceChainHash(prevHash, stream string, revision uint64, typ string, data, m []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range []string{"orders.chain.v1", prevHash, stream, strconv.FormatUint(revision, 10), typ} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(data)))
	h.Write(n[:])
	h.Write(data)
	binary.BigEndian.PutUint64(n[:], uint64(len(m)))
	h.Write(n[:])
	h.Write(m)
	return hex.EncodeToString(h.Sum(nil))
}

// Event ids are a stored format (a retry must append the same ones): nameID is uuid.NewSHA1
// of the name, for names short and longer than its buffer.
func TestNameIDIsNewSHA1(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	strs := jsontest.Strings(r, 200)
	long := string(bytes.Repeat([]byte("k"), 600))
	for i := range 2000 {
		p, k, s := strs[r.IntN(len(strs))], strs[r.IntN(len(strs))], "order-"+strs[r.IntN(len(strs))]
		if i%50 == 0 {
			k = long
		}
		want := uuid.NewSHA1(eventIDSpace, []byte(p+"\x00"+k+"\x00"+s+"\x00"+strconv.Itoa(i)))
		if got := nameID(p, k, s, i); got != want {
			t.Fatalf("nameID(%q, %q, %q, %d) = %s, want %s", p, k, s, i, got, want)
		}
	}
}

// BenchmarkChained encodes and chains the metadata of a keyed create's event, and derives its
// id, as the handler does.
func BenchmarkChained(b *testing.B) {
	md := Metadata{Principal: "tenant-1", IdempotencyKey: "bench-create-123456", Fingerprint: Genesis,
		CorrelationID: "01JDQ2Z8V3M1K4Y6T9B2C5N7PX", Command: "CreateOrder", At: time.Now()}
	data := []byte(`{"orderId":"01JDQ2Z8V3M1K4Y6T9B2C5N7PX","customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":{"amount":1000,"currency":"EUR"}}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := chained(md, Genesis, "order-01JDQ2Z8V3M1K4Y6T9B2C5N7PX", 0, "order.created.v1", data); err != nil {
			b.Fatal(err)
		}
		_ = nameID(md.Principal, md.IdempotencyKey, "order-01JDQ2Z8V3M1K4Y6T9B2C5N7PX", 0)
	}
}
