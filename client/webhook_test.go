package client

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/acme/orders/webhooks"
)

// A known vector, signed here with the documented algorithm: HMAC-SHA256 keyed with the
// secret's bytes over "<id>.<timestamp>.<body>", base64, after "v1,".
var (
	hookKey    = []byte("0123456789abcdef0123456789abcdef")
	hookSecret = "whsec_" + base64.StdEncoding.EncodeToString(hookKey)
	hookID     = "0193a8f2-6c1e-8b3a-9d2f-4e5a6b7c8d9e"
	hookTime   = time.Unix(1795932300, 0) // 2026-11-29T06:05:00Z
	hookBody   = []byte(`{"id":"0193a8f2-6c1e-8b3a-9d2f-4e5a6b7c8d9e","type":"order.paid","createdAt":"2026-11-29T06:05:00Z","orderId":"01JD3Z8Q7T5V9W2X4Y6Z8A0B1C","revision":3,"data":{"event":{"paymentId":"pay-7"},"order":{"id":"01JD3Z8Q7T5V9W2X4Y6Z8A0B1C","status":"paid","version":4}}}`)
)

func testSignature(key []byte, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func hookHeader(ts time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", hookID)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", sig)
	return h
}

func TestVerifyDelivery(t *testing.T) {
	sig := testSignature(hookKey, hookID, hookTime, hookBody)
	otherKey := bytes.Repeat([]byte{7}, 32)
	otherSecret := "whsec_" + base64.StdEncoding.EncodeToString(otherKey)
	tampered := bytes.Replace(hookBody, []byte(`"revision":3`), []byte(`"revision":4`), 1)
	tests := []struct {
		name   string
		secret string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"valid", hookSecret, hookHeader(hookTime, sig), hookBody, hookTime, nil},
		{"within tolerance", hookSecret, hookHeader(hookTime, sig), hookBody, hookTime.Add(4 * time.Minute), nil},
		{"clock behind", hookSecret, hookHeader(hookTime, sig), hookBody, hookTime.Add(-4 * time.Minute), nil},
		{"second signature of a rotation", hookSecret, hookHeader(hookTime, testSignature(otherKey, hookID, hookTime, hookBody)+" "+sig), hookBody, hookTime, nil},
		{"second secret of the receiver", otherSecret + " " + hookSecret, hookHeader(hookTime, sig), hookBody, hookTime, nil},
		{"tampered body", hookSecret, hookHeader(hookTime, sig), tampered, hookTime, ErrWebhookSignature},
		{"other secret", otherSecret, hookHeader(hookTime, sig), hookBody, hookTime, ErrWebhookSignature},
		{"stale", hookSecret, hookHeader(hookTime, sig), hookBody, hookTime.Add(6 * time.Minute), ErrWebhookTimestamp},
		{"from the future", hookSecret, hookHeader(hookTime, sig), hookBody, hookTime.Add(-6 * time.Minute), ErrWebhookTimestamp},
		{"timestamp moved", hookSecret, hookHeader(hookTime.Add(time.Second), sig), hookBody, hookTime, ErrWebhookSignature},
		{"unknown version", hookSecret, hookHeader(hookTime, "v2"+sig[2:]), hookBody, hookTime, ErrWebhookSignature},
		{"no signature", hookSecret, hookHeader(hookTime, ""), hookBody, hookTime, ErrWebhookSignature},
		{"no id", hookSecret, http.Header{"Webhook-Timestamp": {"1795932300"}, "Webhook-Signature": {sig}}, hookBody, hookTime, ErrWebhookSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyDelivery(tt.secret, tt.header, tt.body, tt.now)
			if (tt.want == nil && err != nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("VerifyDelivery = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestVerifyDeliveryOfTheService verifies what the service's own signer signs, during a
// rotation (two keys) too.
func TestVerifyDeliveryOfTheService(t *testing.T) {
	other := bytes.Repeat([]byte{9}, 32)
	sig := webhooks.Sign([][]byte{other, hookKey}, hookID, hookTime.Unix(), hookBody)
	if err := VerifyDelivery(hookSecret, hookHeader(hookTime, sig), hookBody, hookTime); err != nil {
		t.Errorf("VerifyDelivery of webhooks.Sign's %q: %v", sig, err)
	}
	text, key := webhooks.NewSecret()
	sig = webhooks.Sign([][]byte{key}, hookID, hookTime.Unix(), hookBody)
	if err := VerifyDelivery(text, hookHeader(hookTime, sig), hookBody, hookTime); err != nil {
		t.Errorf("VerifyDelivery under a secret of webhooks.NewSecret: %v", err)
	}
}

func TestHandler(t *testing.T) {
	now := time.Now()
	var got []Delivery
	h := Handler(hookSecret, func(d Delivery) error {
		got = append(got, d)
		if d.Payload.Revision == 99 {
			return errors.New("not now")
		}
		return nil
	})
	post := func(header http.Header, body []byte) int {
		r := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(body))
		for k, v := range header {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if code := post(hookHeader(now, testSignature(hookKey, hookID, now, hookBody)), hookBody); code != http.StatusNoContent {
		t.Fatalf("a valid delivery: %d, want 204", code)
	}
	if len(got) != 1 || got[0].ID != hookID || got[0].Payload.Type != "order.paid" || got[0].Payload.Data.Order.Version != 4 {
		t.Fatalf("deliveries %+v", got)
	}
	if code := post(hookHeader(now, testSignature(hookKey, hookID, now, hookBody)), append(hookBody, ' ')); code != http.StatusUnauthorized {
		t.Errorf("a tampered delivery: %d, want 401", code)
	}
	retry := bytes.Replace(hookBody, []byte(`"revision":3`), []byte(`"revision":99`), 1)
	if code := post(hookHeader(now, testSignature(hookKey, hookID, now, retry)), retry); code != http.StatusInternalServerError {
		t.Errorf("a delivery the handler fails: %d, want 500", code)
	}
	if len(got) != 2 {
		t.Errorf("handle called %d times, want 2 (never for the tampered one)", len(got))
	}
}
