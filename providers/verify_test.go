package providers_test

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/fault"
	"github.com/acme/orders/providers"
)

var (
	now      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testBody = []byte(`{"type":"payment.succeeded","data":{"paymentId":"pay-1","amount":1250,"currency":"EUR"}}`)
)

// sign signs body as p does, at now plus skew, and fails the test if it cannot.
func sign(t *testing.T, p providers.Provider, body []byte, skew time.Duration) http.Header {
	t.Helper()
	h, err := p.Sign("msg_1", now.Add(skew), body)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// verifyCase is a delivery and whether it verifies: the same cases for every scheme.
type verifyCase struct {
	name   string
	signer providers.Provider // signs the delivery
	skew   time.Duration      // of the signed timestamp from now
	edit   func(h http.Header, body []byte) (http.Header, []byte)
	want   string // "" to verify, else what the error says
}

func unchanged(h http.Header, b []byte) (http.Header, []byte) { return h, b }

func tamper(h http.Header, b []byte) (http.Header, []byte) {
	b = append([]byte(nil), b...)
	b[len(b)/2] ^= 1
	return h, b
}

func without(name string) func(http.Header, []byte) (http.Header, []byte) {
	return func(h http.Header, b []byte) (http.Header, []byte) { h.Del(name); return h, b }
}

func set(name, value string) func(http.Header, []byte) (http.Header, []byte) {
	return func(h http.Header, b []byte) (http.Header, []byte) { h.Set(name, value); return h, b }
}

// commonCases hold for every scheme, for a provider configured with first and second, and
// other, a secret it does not have.
func commonCases(mk func(...string) providers.Provider, first, second, other string) []verifyCase {
	return []verifyCase{
		{"good", mk(first), 0, unchanged, ""},
		{"good, 4m59s old", mk(first), -providers.Tolerance + time.Second, unchanged, ""},
		{"good, 4m59s ahead", mk(first), providers.Tolerance - time.Second, unchanged, ""},
		{"rotation: signed with the second secret", mk(second), 0, unchanged, ""},
		{"signed with another secret", mk(other), 0, unchanged, "no signature matches"},
		{"body tampered by one byte", mk(first), 0, tamper, "no signature matches"},
		{"stale: 6m old", mk(first), -6 * time.Minute, unchanged, "is more than 5m0s from now"},
		{"stale: 6m ahead", mk(first), 6 * time.Minute, unchanged, "is more than 5m0s from now"},
	}
}

func TestVerifyStandardWebhooks(t *testing.T) {
	other := "whsec_" + strings.Repeat("QUJD", 8)
	cases := append(commonCases(standardProvider, swSecret, swSecret2, other),
		verifyCase{"missing webhook-id", standardProvider(swSecret), 0, without("webhook-id"), "missing webhook-id header"},
		verifyCase{"missing webhook-timestamp", standardProvider(swSecret), 0, without("webhook-timestamp"), "missing webhook-timestamp header"},
		verifyCase{"missing webhook-signature", standardProvider(swSecret), 0, without("webhook-signature"), "missing webhook-signature header"},
		verifyCase{"timestamp not a number", standardProvider(swSecret), 0, set("webhook-timestamp", "12:00"), "malformed webhook-timestamp header"},
		verifyCase{"no v1 signature", standardProvider(swSecret), 0, set("webhook-signature", "v2,abc"), "malformed webhook-signature header: no v1 signature"},
		verifyCase{"another delivery's id", standardProvider(swSecret), 0, set("webhook-id", "msg_2"), "no signature matches"},
		verifyCase{"several signatures, one good", standardProvider(swSecret), 0, func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set("webhook-signature", "v1,bm9wZQ== "+h.Get("webhook-signature"))
			return h, b
		}, ""},
	)
	runVerifyCases(t, standardProvider(swSecret, swSecret2), cases)
}

func TestVerifyStripe(t *testing.T) {
	cases := append(commonCases(stripeProvider, stripeSecret, stripeNext, "whsec_anotherSecret0123456789"),
		verifyCase{"missing Stripe-Signature", stripeProvider(stripeSecret), 0, without("Stripe-Signature"), "missing Stripe-Signature header"},
		verifyCase{"no timestamp", stripeProvider(stripeSecret), 0, set("Stripe-Signature", "v1="+strings.Repeat("ab", 32)), "malformed Stripe-Signature header: no timestamp"},
		verifyCase{"no v1", stripeProvider(stripeSecret), 0, set("Stripe-Signature", "t=1772366400,v0="+strings.Repeat("ab", 32)), "no v1 signature"},
		verifyCase{"not key=value", stripeProvider(stripeSecret), 0, set("Stripe-Signature", "v1,t=1"), "malformed Stripe-Signature header"},
		verifyCase{"two timestamps", stripeProvider(stripeSecret), 0, func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",t=1")
			return h, b
		}, "two timestamps"},
		verifyCase{"timestamp not a number", stripeProvider(stripeSecret), 0, func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set("Stripe-Signature", strings.Replace(h.Get("Stripe-Signature"), "t=", "t=-", 1))
			return h, b
		}, "the timestamp is not unix seconds"},
		verifyCase{"an unreadable v1 beside a good one", stripeProvider(stripeSecret), 0, func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set("Stripe-Signature", h.Get("Stripe-Signature")+",v1=bad_signature,v0=00")
			return h, b
		}, ""},
	)
	runVerifyCases(t, stripeProvider(stripeSecret, stripeNext), cases)
}

// A delivery signed with a secret removed after a rotation no longer verifies.
func TestVerifyRemovedSecret(t *testing.T) {
	for _, tc := range []struct{ rotating, rotated providers.Provider }{
		{standardProvider(swSecret, swSecret2), standardProvider(swSecret2)},
		{stripeProvider(stripeSecret, stripeNext), stripeProvider(stripeNext)},
	} {
		old := tc.rotating
		old.Secrets = old.Secrets[:1]
		h := sign(t, old, testBody, 0)
		if err := tc.rotating.Verify(h, testBody, now); err != nil {
			t.Errorf("%s: during the rotation: %v", tc.rotating.Scheme, err)
		}
		if err := tc.rotated.Verify(h, testBody, now); !errors.Is(err, providers.ErrUnverified) {
			t.Errorf("%s: after the rotation: %v; want ErrUnverified", tc.rotating.Scheme, err)
		}
	}
}

func runVerifyCases(t *testing.T, p providers.Provider, cases []verifyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, body := tc.edit(sign(t, tc.signer, testBody, tc.skew), testBody)
			checkHeadersAlone(t, p, h, tc.want)
			err := p.Verify(h, body, now)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v; want it verified", err)
				}
				return
			}
			if !errors.Is(err, providers.ErrUnverified) || fault.Of(err) != fault.Unauthorized || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify: %v; want ErrUnverified (unauthorized) saying %q", err, tc.want)
			}
			checkNoSecret(t, err.Error(), body, p, tc.signer)
		})
	}
}

// checkHeadersAlone checks that CheckHeaders, which has no body, refuses a delivery that
// Verify refuses for its headers, saying the same, and passes one that only the signature
// over the body decides.
func checkHeadersAlone(t *testing.T, p providers.Provider, h http.Header, want string) {
	t.Helper()
	err := p.CheckHeaders(h, now)
	if want == "" || want == "no signature matches" {
		if err != nil {
			t.Errorf("CheckHeaders: %v; want it passed, for the body to decide", err)
		}
		return
	}
	if !errors.Is(err, providers.ErrUnverified) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckHeaders: %v; want ErrUnverified saying %q", err, want)
	}
}

// checkNoSecret fails t if msg holds one of the providers' secrets or a signature they make.
func checkNoSecret(t *testing.T, msg string, body []byte, ps ...providers.Provider) {
	t.Helper()
	for _, p := range ps {
		for _, s := range p.Secrets {
			if strings.Contains(msg, string(s)) || strings.Contains(msg, strings.TrimPrefix(string(s), "whsec_")) {
				t.Errorf("error %q holds a secret", msg)
			}
		}
		for _, sig := range sign(t, p, body, 0) {
			for _, part := range strings.FieldsFunc(sig[0], func(r rune) bool { return r == ',' || r == '=' || r == ' ' }) {
				if len(part) > 20 && strings.Contains(msg, part) {
					t.Errorf("error %q holds a signature", msg)
				}
			}
		}
	}
}

// stripeVector is Stripe's own: secret "webhook_secret", timestamp 1533204620 and the body of
// src/StripeTests/Resources/event_test_signature.json in github.com/stripe/stripe-dotnet,
// whose v1 signature src/StripeTests/Services/Events/EventUtilityTest.cs gives (the one made
// by `(echo -n "1533204620." && cat event_test_signature.json) | openssl sha256 -hmac
// "webhook_secret"`), with the fixture's v0 signature beside it.
const (
	stripeVectorSecret    = "webhook_secret"
	stripeVectorTimestamp = 1533204620
	stripeVectorHeader    = "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef"
	stripeVectorBody      = `{
  "id": "evt_123",
  "object": "event",
  "account": "acct_123",
  "api_version": "2017-05-25",
  "created": 1533204620,
  "data": {
    "object": {
      "id": "cus_123",
      "object": "customer",
      "created": 123456789,
      "email": "test@stripe.com",
      "livemode": false,
      "metadata": {}
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": "req_123",
    "idempotency_key": "idempotency-key-123"
  },
  "type": "customer.created"
}
`
)

// The known vector verifies, and Sign makes its signature. (Its secret is shorter than Parse
// accepts, so the provider is made without it.)
func TestVerifyStripeKnownVector(t *testing.T) {
	p := stripeProvider(stripeVectorSecret)
	h := http.Header{"Stripe-Signature": {stripeVectorHeader}}
	at := time.Unix(stripeVectorTimestamp, 0)
	if err := p.Verify(h, []byte(stripeVectorBody), at.Add(100*time.Second)); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := p.Verify(h, []byte(stripeVectorBody), at.Add(providers.Tolerance+time.Second)); !errors.Is(err, providers.ErrUnverified) {
		t.Errorf("Verify 5m1s later: %v; want ErrUnverified", err)
	}
	signed, err := p.Sign("", at, []byte(stripeVectorBody))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := signed.Get("Stripe-Signature"), strings.Split(stripeVectorHeader, ",v0=")[0]; got != want {
		t.Errorf("Sign: %s; want %s", got, want)
	}
	if e, err := p.Read(h, []byte(stripeVectorBody)); err != nil || e.ID != "evt_123" || e.Kind != providers.Unmapped {
		t.Errorf("Read: %+v, %v; want evt_123, unmapped", e, err)
	}
}

// Sign writes the headers of each scheme as the scheme's documentation shows them.
func TestSignHeaders(t *testing.T) {
	h := sign(t, standardProvider(swSecret), testBody, 0)
	if h.Get("webhook-id") != "msg_1" || h.Get("webhook-timestamp") != strconv.FormatInt(now.Unix(), 10) || !strings.HasPrefix(h.Get("webhook-signature"), "v1,") {
		t.Errorf("Standard Webhooks headers %v", h)
	}
	h = sign(t, stripeProvider(stripeSecret), testBody, 0)
	ts, sig, ok := strings.Cut(h.Get("Stripe-Signature"), ",v1=")
	if _, err := hex.DecodeString(sig); !ok || ts != "t="+strconv.FormatInt(now.Unix(), 10) || err != nil || len(sig) != 64 {
		t.Errorf("Stripe-Signature %q; want t=<unix>,v1=<64 hex digits>", h.Get("Stripe-Signature"))
	}
	if _, err := standardProvider(swSecret).Sign("", now, testBody); err == nil {
		t.Error("Standard Webhooks Sign without an id succeeded")
	}
	if _, err := stripeProvider().Sign("x", now, testBody); err == nil {
		t.Error("Sign without a secret succeeded")
	}
}
