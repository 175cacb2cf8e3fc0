package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a delivery's webhook-timestamp may be from the receiver's clock:
// an older delivery may be a replay of a captured one.
const WebhookTolerance = 5 * time.Minute

// maxDeliveryBody bounds the body Handler reads; a delivery is one event and one order.
const maxDeliveryBody = 1 << 20

// Errors of VerifyDelivery.
var (
	// ErrWebhookSignature: no signature of the delivery is valid under any of the secrets, or a
	// header is missing or malformed.
	ErrWebhookSignature = errors.New("orders: webhook signature invalid")
	// ErrWebhookTimestamp: the delivery was signed more than WebhookTolerance from now.
	ErrWebhookTimestamp = errors.New("orders: webhook timestamp outside the tolerance")
)

// VerifyDelivery checks a webhook delivery as the service signs it (Standard Webhooks): the
// header webhook-signature holds one or more "v1,<base64 HMAC-SHA256>" separated by spaces, each
// keyed with a secret's bytes (the base64 after "whsec_") over "<webhook-id>.<webhook-timestamp>.<body>".
// secret may hold several secrets separated by spaces, during a rotation; one valid signature
// under one of them is enough. The timestamp must be within WebhookTolerance of now. It returns
// nil, or an error that errors.Is matches to ErrWebhookSignature or ErrWebhookTimestamp.
func VerifyDelivery(secret string, header http.Header, body []byte, now time.Time) error {
	id, ts := header.Get("webhook-id"), header.Get("webhook-timestamp")
	if id == "" || ts == "" {
		return fmt.Errorf("%w: webhook-id or webhook-timestamp missing", ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not seconds", ErrWebhookSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return fmt.Errorf("%w: signed %v from now", ErrWebhookTimestamp, d.Round(time.Second))
	}
	var sigs [][]byte
	for _, s := range strings.Fields(header.Get("webhook-signature")) {
		version, b64, ok := strings.Cut(s, ",")
		if sig, err := base64.StdEncoding.DecodeString(b64); ok && version == "v1" && err == nil {
			sigs = append(sigs, sig)
		}
	}
	for _, s := range strings.Fields(secret) {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil {
			return fmt.Errorf("webhook secret: not whsec_ and base64: %w", err)
		}
		want := sign(key, id, ts, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return ErrWebhookSignature
}

// sign is the HMAC-SHA256 of a delivery under key.
func sign(key []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return mac.Sum(nil)
}

// Delivery is a verified webhook delivery.
type Delivery struct {
	// ID is the webhook-id, the same on every attempt of the event: process each ID once.
	ID        string
	Timestamp time.Time // when the attempt was signed
	Payload   WebhookPayload
	Body      []byte // as received
}

// WebhookPayload is the body of a delivery (schema WebhookPayload).
type WebhookPayload struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"` // such as "order.paid"
	CreatedAt time.Time `json:"createdAt"`
	OrderID   string    `json:"orderId"`
	Revision  int64     `json:"revision"`
	Data      struct {
		Event json.RawMessage `json:"event"` // the order event's data, in the current version of its type
		Order Order           `json:"order"` // the order's state after the event
	} `json:"data"`
}

// Handler returns an http.Handler for the service's webhook deliveries. It verifies each with
// VerifyDelivery (401 if it fails; 400 if the body is not a payload), then calls handle: nil is
// answered 204 and acknowledges the event, an error 500, and the service sends the delivery
// again later. handle may be called more than once for one event: deduplicate on Delivery.ID.
func Handler(secret string, handle func(Delivery) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxDeliveryBody))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := VerifyDelivery(secret, r.Header, body, time.Now()); err != nil {
			http.Error(w, "signature not verified", http.StatusUnauthorized)
			return
		}
		d := Delivery{ID: r.Header.Get("webhook-id"), Body: body}
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64) // verified
		d.Timestamp = time.Unix(ts, 0)
		if err := json.Unmarshal(body, &d.Payload); err != nil {
			http.Error(w, "body is not a webhook payload", http.StatusBadRequest)
			return
		}
		if err := handle(d); err != nil {
			http.Error(w, "not processed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
