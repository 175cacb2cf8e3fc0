package providers_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/providers"
	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

func eur(amount int64) order.Money { return order.Money{Amount: amount, Currency: "EUR"} }

// readCase is a delivery's body and the event Read makes of it, or the error.
type readCase struct {
	name string
	body string
	want providers.Event
	err  string // a part of the error; "" for none
}

func TestReadStandardWebhooks(t *testing.T) {
	const ts = `"timestamp":"2026-03-01T12:00:00Z"`
	ev := func(typ string, kind providers.Kind) providers.Event {
		return providers.Event{ID: "msg_1", Type: typ, Kind: kind}
	}
	with := func(e providers.Event, f func(*providers.Event)) providers.Event { f(&e); return e }
	runReadCases(t, standardProvider(swSecret), http.Header{"Webhook-Id": {"msg_1"}}, []readCase{
		{"payment succeeded", `{"type":"payment.succeeded",` + ts + `,"data":{"paymentId":"pay-1","orderId":"ord-1","amount":1250,"currency":"eur"}}`,
			with(ev("payment.succeeded", providers.PaymentSucceeded), func(e *providers.Event) { e.PaymentID, e.OrderID, e.Amount = "pay-1", "ord-1", eur(1250) }), ""},
		{"payment succeeded without order", `{"type":"payment.succeeded",` + ts + `,"data":{"paymentId":"pay-1","amount":1250,"currency":"EUR"}}`,
			with(ev("payment.succeeded", providers.PaymentSucceeded), func(e *providers.Event) { e.PaymentID, e.Amount = "pay-1", eur(1250) }), ""},
		{"payment failed", `{"type":"payment.failed",` + ts + `,"data":{"paymentId":"pay-1","orderId":"ord-1","reason":"card declined"}}`,
			with(ev("payment.failed", providers.PaymentFailed), func(e *providers.Event) { e.PaymentID, e.OrderID, e.Reason = "pay-1", "ord-1", "card declined" }), ""},
		{"payment failed without reason", `{"type":"payment.failed",` + ts + `,"data":{"paymentId":"pay-1"}}`,
			with(ev("payment.failed", providers.PaymentFailed), func(e *providers.Event) { e.PaymentID, e.Reason = "pay-1", "payment failed" }), ""},
		{"refund succeeded", `{"type":"refund.succeeded",` + ts + `,"data":{"refundId":"ref-1","paymentId":"pay-1","orderId":"ord-1","amount":500,"currency":"EUR"}}`,
			with(ev("refund.succeeded", providers.RefundSucceeded), func(e *providers.Event) {
				e.RefundID, e.PaymentID, e.OrderID, e.Amount = "ref-1", "pay-1", "ord-1", eur(500)
			}), ""},
		{"unmapped", `{"type":"payment.created",` + ts + `,"data":{"amount":"not ours to read"}}`, ev("payment.created", providers.Unmapped), ""},
		{"not JSON", `payment.succeeded`, providers.Event{}, "not a JSON object"},
		{"a list", `[]`, providers.Event{}, "not a JSON object"},
		{"no type", `{` + ts + `,"data":{}}`, providers.Event{}, "no type"},
		{"no data", `{"type":"payment.succeeded"}`, providers.Event{}, "payment.succeeded: data"},
		{"no payment id", `{"type":"payment.failed","data":{}}`, providers.Event{}, "payment.failed without a payment id"},
		{"no refund id", `{"type":"refund.succeeded","data":{"paymentId":"pay-1","amount":500,"currency":"EUR"}}`, providers.Event{}, "without a refund id"},
		{"no amount", `{"type":"payment.succeeded","data":{"paymentId":"pay-1","currency":"EUR"}}`, providers.Event{}, "without a positive amount"},
		{"fractional amount", `{"type":"payment.succeeded","data":{"paymentId":"pay-1","amount":12.5,"currency":"EUR"}}`, providers.Event{}, "data"},
		{"bad currency", `{"type":"payment.succeeded","data":{"paymentId":"pay-1","amount":1250,"currency":"EURO"}}`, providers.Event{}, `currency "EURO"`},
	})
	if _, err := standardProvider(swSecret).Read(http.Header{}, []byte(`{"type":"payment.failed","data":{"paymentId":"p"}}`)); !errors.Is(err, providers.ErrMalformed) {
		t.Errorf("Read without webhook-id: %v; want ErrMalformed", err)
	}
}

// stripeEvent is a Stripe event of type typ with object as its data.object.
func stripeEvent(typ, object string) string {
	return `{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1772366400,"livemode":false,"pending_webhooks":1,` +
		`"request":{"id":null,"idempotency_key":null},"type":"` + typ + `","data":{"object":` + object + `}}`
}

// Objects of Stripe's events.
const (
	stripePI = `{"id":"pi_1","object":"payment_intent","amount":2000,"amount_received":1990,"currency":"usd","status":"succeeded",` +
		`"latest_charge":"ch_1","metadata":{"order_id":"ord-1"},"payment_method_types":["card"],"last_payment_error":null}`
	stripePIFailed = `{"id":"pi_1","object":"payment_intent","amount":2000,"amount_received":0,"currency":"usd","status":"requires_payment_method",` +
		`"metadata":{"orderId":"ord-1"},"last_payment_error":{"code":"card_declined","decline_code":"generic_decline","message":"Your card was declined.","type":"card_error"}}`
	stripeRefund = `{"id":"re_1","object":"refund","amount":500,"charge":"ch_1","currency":"eur","metadata":{},"payment_intent":"pi_1","reason":null,"status":"%s"}`
	stripeCharge = `{"id":"ch_1","object":"charge","amount":2000,"amount_captured":2000,"amount_refunded":800,"currency":"eur","metadata":{"order_id":"ord-1"},` +
		`"payment_intent":"pi_1","refunded":false,"refunds":{"object":"list","data":[{"id":"re_2","object":"refund","amount":300,"currency":"eur","status":"succeeded"},` +
		`{"id":"re_1","object":"refund","amount":500,"currency":"eur","status":"succeeded"}],"has_more":false,"total_count":2,"url":"/v1/charges/ch_1/refunds"}}`
	stripeChargeWithoutRefunds = `{"id":"ch_1","object":"charge","amount":2000,"amount_refunded":2000,"currency":"eur","metadata":{},"payment_intent":"pi_1","refunded":true}`
)

// Stripe's bodies below are cut down from the examples of its API reference, keeping fields
// of other types than Read reads, to show that they are skipped.
func TestReadStripe(t *testing.T) {
	ev := func(typ string, kind providers.Kind, f func(*providers.Event)) providers.Event {
		e := providers.Event{ID: "evt_1", Type: typ, Kind: kind}
		if f != nil {
			f(&e)
		}
		return e
	}
	runReadCases(t, stripeProvider(stripeSecret), http.Header{}, []readCase{
		{"payment_intent.succeeded", stripeEvent("payment_intent.succeeded", stripePI),
			ev("payment_intent.succeeded", providers.PaymentSucceeded, func(e *providers.Event) {
				e.PaymentID, e.OrderID, e.Amount = "pi_1", "ord-1", order.Money{Amount: 1990, Currency: "USD"}
			}), ""},
		{"payment_intent.succeeded without amount_received", stripeEvent("payment_intent.succeeded", `{"id":"pi_1","amount":2000,"currency":"usd"}`),
			ev("payment_intent.succeeded", providers.PaymentSucceeded, func(e *providers.Event) {
				e.PaymentID, e.Amount = "pi_1", order.Money{Amount: 2000, Currency: "USD"}
			}), ""},
		{"payment_intent.payment_failed", stripeEvent("payment_intent.payment_failed", stripePIFailed),
			ev("payment_intent.payment_failed", providers.PaymentFailed, func(e *providers.Event) {
				e.PaymentID, e.OrderID, e.Reason = "pi_1", "ord-1", "Your card was declined."
			}), ""},
		{"payment_intent.payment_failed without error", stripeEvent("payment_intent.payment_failed", `{"id":"pi_1","last_payment_error":null}`),
			ev("payment_intent.payment_failed", providers.PaymentFailed, func(e *providers.Event) { e.PaymentID, e.Reason = "pi_1", "payment failed" }), ""},
		{"refund.updated succeeded", stripeEvent("refund.updated", fmt.Sprintf(stripeRefund, "succeeded")),
			ev("refund.updated", providers.RefundSucceeded, func(e *providers.Event) {
				e.RefundID, e.PaymentID, e.Amount = "re_1", "pi_1", eur(500)
			}), ""},
		{"refund.updated pending", stripeEvent("refund.updated", fmt.Sprintf(stripeRefund, "pending")), ev("refund.updated", providers.Unmapped, nil), ""},
		{"refund.updated failed", stripeEvent("refund.updated", fmt.Sprintf(stripeRefund, "failed")), ev("refund.updated", providers.Unmapped, nil), ""},
		{"charge.refunded: the newest refund", stripeEvent("charge.refunded", stripeCharge),
			ev("charge.refunded", providers.RefundSucceeded, func(e *providers.Event) {
				e.RefundID, e.PaymentID, e.OrderID, e.Amount = "re_2", "pi_1", "ord-1", eur(300)
			}), ""},
		{"charge.refunded without refunds", stripeEvent("charge.refunded", stripeChargeWithoutRefunds),
			ev("charge.refunded", providers.RefundSucceeded, func(e *providers.Event) {
				e.RefundID, e.PaymentID, e.Amount = "ch_1", "pi_1", eur(2000)
			}), ""},
		{"unmapped", stripeEvent("customer.created", `{"id":"cus_1","object":"customer","amount":"not ours to read"}`), ev("customer.created", providers.Unmapped, nil), ""},
		{"unmapped without data", `{"id":"evt_1","object":"event","type":"ping"}`, ev("ping", providers.Unmapped, nil), ""},
		{"not JSON", `evt_1`, providers.Event{}, "not a JSON object"},
		{"not an event", `{"id":"pi_1","object":"payment_intent","type":"payment_intent.succeeded"}`, providers.Event{}, `an object "payment_intent", not an event`},
		{"no id", `{"object":"event","type":"ping"}`, providers.Event{}, "no id"},
		{"no type", `{"id":"evt_1","object":"event"}`, providers.Event{}, "no type"},
		{"no object", `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{}}`, providers.Event{}, "data.object"},
		{"no payment intent", stripeEvent("refund.updated", `{"id":"re_1","amount":500,"currency":"eur","status":"succeeded","payment_intent":null}`), providers.Event{}, "without a payment id"},
		{"no currency", stripeEvent("payment_intent.succeeded", `{"id":"pi_1","amount":2000}`), providers.Event{}, `currency ""`},
		{"amount a string", stripeEvent("payment_intent.succeeded", `{"id":"pi_1","amount":"2000","currency":"usd"}`), providers.Event{}, "data.object"},
	})
}

func runReadCases(t *testing.T, p providers.Provider, h http.Header, cases []readCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Read(h, []byte(tc.body))
			if tc.err != "" {
				if !errors.Is(err, providers.ErrMalformed) || fault.Of(err) != fault.Invalid || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Read: %+v, %v; want ErrMalformed saying %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

// bodyCases are an event of each kind, as the command line and the tests give them to Body.
func bodyCases(scheme providers.Scheme) []providers.Event {
	pay, ref := "pay-1", "ref-1"
	if scheme == providers.Stripe {
		pay, ref = "pi_1", "re_1"
	}
	return []providers.Event{
		{ID: "evt_1", Kind: providers.PaymentSucceeded, PaymentID: pay, OrderID: "ord-1", Amount: eur(1250)},
		{ID: "evt_1", Kind: providers.PaymentSucceeded, PaymentID: pay, Amount: eur(1)},
		{ID: "evt_1", Kind: providers.PaymentFailed, PaymentID: pay, OrderID: "ord-1", Reason: "card declined"},
		{ID: "evt_1", Kind: providers.RefundSucceeded, PaymentID: pay, OrderID: "ord-1", RefundID: ref, Amount: eur(500)},
	}
}

// Body and Read are inverses, for each kind of each scheme, and for each of Stripe's types.
func TestBodyReadRoundTrip(t *testing.T) {
	for _, p := range []providers.Provider{standardProvider(swSecret), stripeProvider(stripeSecret)} {
		cases := bodyCases(p.Scheme)
		if p.Scheme == providers.Stripe {
			refund := cases[3]
			refund.Type = "charge.refunded"
			byCharge := refund
			byCharge.RefundID, byCharge.Type = "ch_1", "charge.refunded"
			cases = append(cases, refund, byCharge)
		}
		cases = append(cases, providers.Event{ID: "evt_1", Type: "something.else", Kind: providers.Unmapped, PaymentID: "x"})
		for _, e := range cases {
			checkRoundTrip(t, p, e)
		}
	}
}

// The same, for any ids, amounts, currencies and reasons.
func TestBodyReadRoundTripProperty(t *testing.T) {
	ids := rapid.StringMatching(`[A-Za-z0-9_\-]{1,40}`)
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SampledFrom([]providers.Provider{standardProvider(swSecret), stripeProvider(stripeSecret)}).Draw(t, "provider")
		e := providers.Event{
			ID:        ids.Draw(t, "id"),
			Kind:      rapid.SampledFrom([]providers.Kind{providers.PaymentSucceeded, providers.PaymentFailed, providers.RefundSucceeded}).Draw(t, "kind"),
			PaymentID: ids.Draw(t, "payment"),
			OrderID:   rapid.OneOf(rapid.Just(""), ids).Draw(t, "order"),
			RefundID:  ids.Draw(t, "refund"),
			Amount: order.Money{
				Amount:   rapid.Int64Range(1, 1<<53).Draw(t, "amount"),
				Currency: order.Currency(rapid.StringMatching(`[A-Z]{3}`).Draw(t, "currency")),
			},
			Reason: rapid.StringN(1, 100, -1).Draw(t, "reason"),
		}
		checkRoundTrip(t, p, e)
	})
}

// checkRoundTrip checks that p reads the signed body of e as e, but for what the kind of e
// does not carry.
func checkRoundTrip(t interface {
	Helper()
	Fatalf(string, ...any)
	Errorf(string, ...any)
}, p providers.Provider, e providers.Event) {
	t.Helper()
	body, err := p.Body(e, now)
	if err != nil {
		t.Fatalf("%s: Body(%+v): %v", p.Scheme, e, err)
	}
	h, err := p.Sign(e.ID, now, body)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if err := p.Verify(h, body, now); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	got, err := p.Read(h, body)
	if err != nil {
		t.Fatalf("%s: Read(%s): %v", p.Scheme, body, err)
	}
	want := e
	switch e.Kind {
	case providers.PaymentSucceeded:
		want.RefundID, want.Reason = "", ""
	case providers.PaymentFailed:
		want.RefundID, want.Amount = "", order.Money{}
	case providers.RefundSucceeded:
		want.Reason = ""
	case providers.Unmapped:
		want = providers.Event{ID: e.ID, Type: e.Type, Kind: providers.Unmapped}
	}
	if want.Type == "" {
		want.Type = got.Type // the scheme's type of the kind
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Read(Body(%+v)) (-want +got):\n%s\nbody %s", p.Scheme, e, diff, body)
	}
}

func TestBodyNeedsAType(t *testing.T) {
	for _, p := range []providers.Provider{standardProvider(swSecret), stripeProvider(stripeSecret)} {
		if _, err := p.Body(providers.Event{ID: "evt_1", Kind: providers.Unmapped}, now); err == nil {
			t.Errorf("%s: Body of an unmapped event without a type succeeded", p.Scheme)
		}
	}
	if _, err := stripeProvider(stripeSecret).Body(providers.Event{Kind: providers.PaymentFailed, PaymentID: "pi_1"}, now); err == nil {
		t.Error("Stripe: Body of an event without an id succeeded")
	}
}
