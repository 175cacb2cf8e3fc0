package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/orders/idempotency"
	"pgregory.net/rapid"
)

// What decode accepts is what the fingerprint sees: two bodies with one fingerprint decode to
// one command, and bodies it would read as one command but the fingerprint as two, or the
// reverse, are refused.
func TestDecodeReadsNamesAsWrittenOnce(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"paymentId":"p","amount":5}`, true},
		{` {"amount":5, "paymentId":"p"} `, true},
		{`{"pay\u006dentId":"p","amount":5}`, true}, // an escaped name is the name
		{`{"paymentId":"p\ud83d\ude00","amount":5}`, true},
		{`{"paymentId":"p\\ud800","amount":5}`, true}, // an escaped backslash, then text
		{`null`, true},
		{"\t{ \"paymentId\" :\n\"p\" , \"amount\" : 5 }\r\n", true},
		{`{"paymentId":"a\"}{,]\\","amount":5}`, true},
		{`{"paymentId":null,"amount":5}`, true},
		{`{"paymentId":"p","Amount":5}`, false},
		{`{"paymentId":"p","amount":5,"AMOUNT":6}`, false},
		{`{"paymentId":"p","amount":5,"amount":6}`, false},
		{`{"paymentId":"p","amount":5,"paymentıd":"q"}`, false},
		{`{"paymentId":"p","amount":5,"amount":5}`, false},
		{`{"paymentId":"\ud800","amount":5}`, false},
		{`{"paymentId":"\udfff","amount":5}`, false},
		{`{"paymentId":"\ud800\u0041","amount":5}`, false},
		{`{"paymentId":"\ud800\\udc00","amount":5}`, false},
		{`{"paymentId":"p\ud800`, false},
		{`{"paymentId":"p","amount":[5]}`, false},
		{`{"paymentId":{"a":1},"amount":5}`, false},
		{`[{"paymentId":"p","amount":5}]`, false},
		{`{"paymentId":"p","amount":5}]`, false},
		{`{"paymentId":"p","amount":5}{}`, false},
	} {
		var b paymentBody
		err := decode([]byte(tc.body), &b)
		if tc.ok != (err == nil) {
			t.Errorf("decode(%s) = %v; want ok %v", tc.body, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errMalformed) {
			t.Errorf("decode(%s) = %v; want a malformed request", tc.body, err)
		}
	}
}

// The case that made the rule: two bodies, one fingerprint, two commands.
func TestOneFingerprintIsOneCommand(t *testing.T) {
	a, b := `{"paymentId":"p","amount":2000,"AMOUNT":1}`, `{"paymentId":"p","AMOUNT":1,"amount":2000}`
	fa, errA := idempotency.Fingerprint("POST", "/v1/orders/x/payments", []byte(a))
	fb, errB := idempotency.Fingerprint("POST", "/v1/orders/x/payments", []byte(b))
	if errA != nil || errB != nil || fa != fb {
		t.Fatalf("fingerprints %s, %s (%v, %v); this test wants two bodies with one", fa, fb, errA, errB)
	}
	for _, body := range []string{a, b} {
		if _, err := startPayment.parse(nil, []byte(body)); err == nil {
			t.Errorf("%s was read as a command; want it refused", body)
		}
	}
	// Nested objects too.
	for body, ok := range map[string]bool{
		`{"customerId":"c","currency":"EUR","lines":[{"sku":"a","Sku":"b","quantity":1,"unitPrice":1}]}`:                                      false,
		`{"customerId":"c","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPrice":1,"quantity":2}]}`:                                   false,
		`{"customerId":"c","currency":"EUR","lines":[{"sku":"a","quantity":1,"unitPrice":1}, {"s\u006bu":"b", "quantity":1,"unitPrice":1} ]}`: true,
		`{"customerId":"c","lines":[],"currency":"EUR"}`:                                                                                      true,
		`{"customerId":"c","lines":null,"currency":"EUR","clientReference":"r"}`:                                                              true,
		`{"customerId":"c","lines":[{"sku":"a","quantity":1,"unitPrice":1}],"currency":"EUR","Currency":"USD"}`:                               false,
	} {
		var c createBody
		if err := decode([]byte(body), &c); ok != (err == nil) {
			t.Errorf("decode(%s) = %v; want ok %v", body, err, ok)
		}
	}
}

// Whatever body decode accepts, it reads as the fingerprint reads it: decoding the body's
// canonical form (the value encoding/json reads, written again) gives the same command. So two
// accepted bodies with one fingerprint, whose canonical forms are one, are one command. The
// bodies are drawn with the names of the route, case variants, look-alikes and repeats, in any
// order, with names and strings escaped or not.
func TestDecodeReadsAsTheFingerprint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := []string{"paymentId", "amount", "PaymentId", "AMOUNT", "paymentId", "amount", "paymentıd", "extra"}
		var b strings.Builder
		b.WriteString("{")
		for i := range rapid.IntRange(0, 5).Draw(t, "members") {
			if i > 0 {
				b.WriteString(rapid.SampledFrom([]string{",", " , ", ",\n"}).Draw(t, "comma"))
			}
			name := rapid.SampledFrom(names).Draw(t, "name")
			if rapid.Bool().Draw(t, "escape name") {
				name = strings.Replace(name, "a", `\u0061`, 1)
			}
			b.WriteString(`"` + name + `":`)
			switch kind := rapid.IntRange(0, 3).Draw(t, "kind"); {
			case strings.EqualFold(name, "amount") && kind < 3 || kind == 0:
				b.WriteString(strconv.Itoa(rapid.IntRange(-3, 3000).Draw(t, "int")))
			case kind == 1 || kind == 0:
				s := rapid.SampledFrom([]string{"p", "pay-1", `\u00e9`, `a\"b`, "é", `\ud83d\ude00`, `\ud800`}).Draw(t, "string")
				b.WriteString(`"` + s + `"`)
			case kind == 2:
				b.WriteString(rapid.SampledFrom([]string{"null", "5.0", "1e3", "true", "[1]"}).Draw(t, "other"))
			default:
				b.WriteString(`"` + strconv.Itoa(rapid.IntRange(0, 9).Draw(t, "digit")) + `"`)
			}
		}
		b.WriteString("}")
		body := []byte(b.String())
		var got paymentBody
		if decode(body, &got) != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decode accepted %s, which encoding/json refuses: %v", body, err)
		}
		canonical, _ := json.Marshal(v)
		var again paymentBody
		if err := decode(canonical, &again); err != nil || !reflect.DeepEqual(got, again) {
			g, _ := json.Marshal(got)
			a, _ := json.Marshal(again)
			t.Fatalf("%s reads as %s; its canonical form %s as %s (%v)", body, g, canonical, a, err)
		}
	})
}
