package api

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/acme/orders/jsonenc/jsonenctest"
)

// sameCreate fails if decodeCreate takes a body that decode refuses, or reads it otherwise.
func sameCreate(t *testing.T, body []byte) (taken bool) {
	t.Helper()
	var fast, slow createBody
	if !decodeCreate(body, &fast) {
		return false
	}
	if err := decode(body, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decodeCreate(%s) = %+v; decode: %+v, %v", body, fast, slow, err)
	}
	return true
}

// randomCreate writes a create's body, or something near one: names known, unknown or cased
// otherwise, given twice or not at all; values of every JSON kind and number form; strings
// raw, escaped or not UTF-8; whitespace anywhere; data after it.
func randomCreate(r *rand.Rand, strs []string, depth int) string {
	ws := func() string {
		if r.IntN(50) == 0 {
			return "\u00a0" // not JSON's whitespace
		}
		return []string{"", "", "", "", " ", "\n\t", "\r"}[r.IntN(7)]
	}
	value := func(name string) string {
		switch k := r.IntN(10); {
		case name == "lines" && k < 8 && depth == 0:
			var lines []string
			for range r.IntN(4) {
				lines = append(lines, ws()+randomCreate(r, strs, 1)+ws())
			}
			return "[" + strings.Join(lines, ",") + []string{"]", ",]"}[r.IntN(10)/9]
		case (name == "quantity" || name == "unitPrice") && k < 8:
			return []string{"0", "-0", "12", "-3", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "01", "1.0", "1e2", "-", "2E1"}[r.IntN(12)]
		case k < 6:
			return `"` + []string{"c-1", "EUR", "sku-1", "web", "Mug", "é €", ""}[r.IntN(7)] + `"`
		case k < 9:
			s := strs[r.IntN(len(strs))]
			if r.IntN(4) == 0 {
				return `"` + s + `"` // raw: maybe not JSON
			}
			q, _ := json.Marshal(s)
			return string(q)
		}
		return []string{"null", "true", "{}", "[]", "1", `"\u00e9"`, `"a\"b"`}[r.IntN(7)]
	}
	names := []string{"customerId", "currency", "lines", "clientReference", "channel"}
	if depth > 0 {
		names = []string{"sku", "name", "quantity", "unitPrice"}
	}
	var members []string
	for _, n := range names {
		for range []int{1, 1, 1, 1, 1, 0, 2}[r.IntN(7)] {
			members = append(members, ws()+`"`+n+`"`+ws()+":"+ws()+value(n)+ws())
		}
	}
	if r.IntN(20) == 0 {
		members = append(members, []string{`"CustomerId":"x"`, `"other":1`, `"sku":"s"`}[r.IntN(3)])
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	body := ws() + "{" + strings.Join(members, ",") + "}" + ws()
	if depth == 0 && r.IntN(10) == 0 {
		body += []string{"x", "}", "{}", "\x00"}[r.IntN(4)]
	}
	return body
}

// decodeCreate reads what decode reads, as decode reads it, and takes the usual create.
func TestDecodeCreateIsDecodes(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	strs := append(jsonenctest.Strings(r, 100), "c-1", "EUR", "sku-1", "web")
	taken := 0
	for range 30000 {
		if sameCreate(t, []byte(randomCreate(r, strs, 0))) {
			taken++
		}
	}
	usual := `{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","name":"Mug","quantity":1,"unitPrice":500}],"clientReference":"ref-1","channel":"web"}`
	if !sameCreate(t, []byte(usual)) || !sameCreate(t, []byte(`{"customerId":"c","currency":"EUR","lines":[]}`)) || taken < 500 {
		t.Fatalf("decodeCreate took %d of the random bodies, or not the usual ones", taken)
	}
	if testing.Verbose() {
		t.Logf("decodeCreate took %d of the random bodies", taken)
	}
}

// FuzzDecodeCreate: whatever decodeCreate takes, decode takes too, into the same value.
func FuzzDecodeCreate(f *testing.F) {
	r := rand.New(rand.NewPCG(25, 26))
	strs := jsonenctest.Strings(r, 30)
	for range 50 {
		f.Add([]byte(randomCreate(r, strs, 0)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameCreate(t, body)
	})
}

// BenchmarkDecodeCreate reads a create's body as its route does (reader) and through decode,
// encoding/json's decoding with the checks of names and surrogates (decode).
func BenchmarkDecodeCreate(b *testing.B) {
	body := []byte(`{"customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","quantity":2,"unitPrice":1000},{"sku":"sku-2","quantity":1,"unitPrice":500}]}`)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c createBody
			if err := decode(body, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c createBody
			if !decodeCreate(body, &c) {
				b.Fatal("declined")
			}
		}
	})
}
