package api

import (
	"errors"
	"testing"

	"github.com/acme/orders/idempotency"
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
