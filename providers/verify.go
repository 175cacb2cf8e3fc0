package providers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/fault"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// ErrUnverified is the error of a delivery whose signature or timestamp does not hold. Verify
// wraps it with what is wrong, never with a secret or a computed signature.
var ErrUnverified = fault.New(fault.Unauthorized, "delivery-unverified", "the delivery's signature could not be verified")

// Tolerance is how far a delivery's signed timestamp may be from now, either way: a captured
// delivery cannot be replayed later than this.
const Tolerance = 5 * time.Minute

// stripeSignatureHeader is the header of a Stripe delivery's timestamp and signatures.
const stripeSignatureHeader = "Stripe-Signature"

// Verify checks a delivery: that one of p's secrets signed the raw body and the signed
// timestamp, and that the timestamp is within Tolerance of now. It reads nothing of the body
// but its bytes. Its errors wrap ErrUnverified.
func (p Provider) Verify(h http.Header, body []byte, now time.Time) error {
	switch p.Scheme {
	case StandardWebhooks:
		return p.verifyStandard(h, body, now)
	case Stripe:
		return p.verifyStripe(h, body, now)
	}
	return fmt.Errorf("%w: unknown scheme %q", ErrUnverified, p.Scheme)
}

// CheckHeaders checks what of a delivery can be checked without its body: that the scheme's
// headers are there and well formed, and that the signed timestamp is within Tolerance of
// now. A delivery that passes may still not verify; one that fails never would, so that its
// body need not be read at all. Verify checks the same. Its errors wrap ErrUnverified.
func (p Provider) CheckHeaders(h http.Header, now time.Time) error {
	switch p.Scheme {
	case StandardWebhooks:
		return checkStandardHeaders(h, now)
	case Stripe:
		_, _, err := checkStripeHeader(h, now)
		return err
	}
	return fmt.Errorf("%w: unknown scheme %q", ErrUnverified, p.Scheme)
}

// checkStandardHeaders checks a Standard Webhooks delivery's headers (see CheckHeaders). The
// library's Verify checks the timestamp against time.Now, so it is checked here against now.
func checkStandardHeaders(h http.Header, now time.Time) error {
	for _, name := range []string{standardwebhooks.HeaderWebhookID, standardwebhooks.HeaderWebhookTimestamp, standardwebhooks.HeaderWebhookSignature} {
		if h.Get(name) == "" {
			return fmt.Errorf("%w: missing %s header", ErrUnverified, name)
		}
	}
	at, err := parseUnix(h.Get(standardwebhooks.HeaderWebhookTimestamp))
	if err != nil {
		return fmt.Errorf("%w: malformed %s header: %w", ErrUnverified, standardwebhooks.HeaderWebhookTimestamp, err)
	}
	if err := checkTime(at, now); err != nil {
		return err
	}
	if !hasV1(h.Get(standardwebhooks.HeaderWebhookSignature)) {
		return fmt.Errorf("%w: malformed %s header: no v1 signature", ErrUnverified, standardwebhooks.HeaderWebhookSignature)
	}
	return nil
}

// verifyStandard verifies a Standard Webhooks delivery through the library, once its headers
// are checked, ignoring the timestamp that they checked.
func (p Provider) verifyStandard(h http.Header, body []byte, now time.Time) error {
	if err := checkStandardHeaders(h, now); err != nil {
		return err
	}
	for _, s := range p.Secrets {
		wh, err := standardwebhooks.NewWebhook(string(s))
		if err == nil && wh.VerifyIgnoringTimestamp(body, h) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrUnverified)
}

// hasV1 reports whether a webhook-signature header holds a v1 signature among its
// space-separated "version,signature" pairs.
func hasV1(header string) bool {
	for sig := range strings.FieldsSeq(header) {
		if v, s, ok := strings.Cut(sig, ","); ok && v == "v1" && s != "" {
			return true
		}
	}
	return false
}

// checkStripeHeader checks a Stripe delivery's header (see CheckHeaders) and returns its
// timestamp's text and its v1 signatures.
func checkStripeHeader(h http.Header, now time.Time) (t string, sigs [][]byte, err error) {
	header := h.Get(stripeSignatureHeader)
	if header == "" {
		return "", nil, fmt.Errorf("%w: missing %s header", ErrUnverified, stripeSignatureHeader)
	}
	t, sigs, err = parseStripeHeader(header)
	if err != nil {
		return "", nil, fmt.Errorf("%w: malformed %s header: %w", ErrUnverified, stripeSignatureHeader, err)
	}
	at, err := parseUnix(t)
	if err != nil {
		return "", nil, fmt.Errorf("%w: malformed %s header: %w", ErrUnverified, stripeSignatureHeader, err)
	}
	if err := checkTime(at, now); err != nil {
		return "", nil, err
	}
	return t, sigs, nil
}

// verifyStripe verifies a Stripe delivery. It is written here rather than taken from
// stripe-go, which would bring the whole Stripe API client for these few lines.
func (p Provider) verifyStripe(h http.Header, body []byte, now time.Time) error {
	t, sigs, err := checkStripeHeader(h, now)
	if err != nil {
		return err
	}
	for _, s := range p.Secrets {
		want := stripeSignature(string(s), t, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: no signature matches", ErrUnverified)
}

// parseStripeHeader reads "t=<unix>,v1=<hex>[,v1=<hex>]…" into the timestamp's text and the
// v1 signatures. Other schemes' signatures (v0, the test mode's) are skipped, and so are v1
// values that are not hex, as Stripe's own libraries do.
func parseStripeHeader(header string) (t string, sigs [][]byte, err error) {
	for item := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		switch {
		case !ok:
			return "", nil, errors.New("an item is not key=value")
		case k == "t" && t != "":
			return "", nil, errors.New("two timestamps")
		case k == "t":
			t = v
		case k == "v1":
			if sig, err := hex.DecodeString(v); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	switch {
	case t == "":
		return "", nil, errors.New("no timestamp (t=)")
	case len(sigs) == 0:
		return "", nil, errors.New("no v1 signature")
	}
	return t, sigs, nil
}

// stripeSignature is Stripe's v1 signature: the HMAC-SHA256 of "<t>.<body>" keyed with the
// secret's text, prefix and all.
func stripeSignature(secret, t string, body []byte) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// parseUnix reads a timestamp of unix seconds: decimal digits only.
func parseUnix(s string) (time.Time, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return time.Time{}, errors.New("the timestamp is not unix seconds")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("the timestamp is out of range")
	}
	return time.Unix(n, 0), nil
}

// checkTime checks that a signed timestamp is within Tolerance of now, in either direction.
func checkTime(at, now time.Time) error {
	if d := now.Sub(at); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w: timestamp %s is more than %s from now", ErrUnverified, at.UTC().Format(time.RFC3339), Tolerance)
	}
	return nil
}

// Sign returns the headers that sign body as p's scheme does, with p's first secret, for
// delivery id at time at. Standard Webhooks sends id as webhook-id; Stripe ignores it, since
// its event id is in the body. It is for the command line and tests: the service only
// verifies.
func (p Provider) Sign(id string, at time.Time, body []byte) (http.Header, error) {
	if len(p.Secrets) == 0 {
		return nil, fmt.Errorf("%s: no secret to sign with", p.Name)
	}
	secret, ts := string(p.Secrets[0]), strconv.FormatInt(at.Unix(), 10)
	h := http.Header{}
	switch p.Scheme {
	case StandardWebhooks:
		if id == "" {
			return nil, errors.New("a Standard Webhooks delivery needs an id")
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, fmt.Errorf("%s: the first secret is not %s followed by base64", p.Name, secretPrefix)
		}
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return nil, fmt.Errorf("sign: %w", err)
		}
		h.Set(standardwebhooks.HeaderWebhookID, id)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, ts)
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
	case Stripe:
		h.Set(stripeSignatureHeader, "t="+ts+",v1="+hex.EncodeToString(stripeSignature(secret, ts, body)))
	default:
		return nil, fmt.Errorf("%s: unknown scheme %q", p.Name, p.Scheme)
	}
	return h, nil
}
