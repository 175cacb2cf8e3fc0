package client

import (
	"context"
	"errors"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// Statuses of a DeliveryRecord, and the lists Deliveries reads.
const (
	DeliveryFailed  = "failed"  // dead-lettered: the last retry failed, or the receiver answered 410
	DeliveryPending = "pending" // in flight, or waiting for a retry at NextAttemptAt
)

// DeliveryRecord is the service's record of a webhook delivery to one of the caller's endpoints
// (schema WebhookDelivery); Delivery is what a receiver gets.
type DeliveryRecord struct {
	ID       string `json:"id"`   // the webhook-id of every attempt
	Type     string `json:"type"` // such as "order.paid"
	OrderID  string `json:"orderId"`
	Revision int64  `json:"revision"`
	Status   string `json:"status"` // DeliveryFailed or DeliveryPending
	Tries    int    `json:"tries"`  // the attempts made
	// NextAttemptAt is when a pending delivery is tried next; zero for a failed one.
	NextAttemptAt time.Time `json:"nextAttemptAt,omitzero"`
	// DeadLetteredAt is when a failed delivery was given up; zero for a pending one.
	DeadLetteredAt time.Time         `json:"deadLetteredAt,omitzero"`
	Attempts       []DeliveryAttempt `json:"attempts"` // the latest 20 at most, oldest first
}

// DeliveryAttempt is one attempt of a delivery (schema WebhookAttempt).
type DeliveryAttempt struct {
	At        time.Time `json:"at"`
	Status    int       `json:"status,omitempty"` // the receiver's HTTP status; 0 if none came
	LatencyMS float64   `json:"latencyMs"`
	Error     string    `json:"error,omitempty"` // why it failed; "" on success
}

// deliveryPage is the answer of GET /v1/webhook-endpoints/{id}/deliveries (schema
// WebhookDeliveryPage).
type deliveryPage struct {
	Deliveries []DeliveryRecord `json:"deliveries"`
}

func (p *deliveryPage) check() error {
	if p.Deliveries == nil {
		return errors.New("page without deliveries")
	}
	for _, d := range p.Deliveries {
		if d.ID == "" {
			return errors.New("delivery without an id")
		}
	}
	return nil
}

// DeliveriesOption selects the deliveries that Deliveries lists.
type DeliveriesOption func(url.Values)

// WithDeliveryStatus lists the deliveries of status DeliveryFailed (the default) or
// DeliveryPending.
func WithDeliveryStatus(status string) DeliveriesOption {
	return func(q url.Values) { setIf(q, "status", status) }
}

// WithDeliveryLimit lists at most n deliveries, 1–1000 (the service's default is 100).
func WithDeliveryLimit(n int) DeliveriesOption {
	return func(q url.Values) {
		if n > 0 {
			q.Set("limit", strconv.Itoa(n))
		}
	}
}

// Deliveries returns the failed deliveries of the caller's webhook endpoint endpointID (the
// dead letters, the latest last), or with WithDeliveryStatus(DeliveryPending) its pending ones.
// The contract gives this list no cursor: it is one answer of at most the limit's deliveries
// (WithDeliveryLimit), fetched when the loop starts; to see older ones, retry or re-send the
// failed deliveries and list again. An error, such as ErrNotFound for an endpoint that is not
// the caller's, ends the sequence.
func (c *Client) Deliveries(ctx context.Context, endpointID string, opts ...DeliveriesOption) iter.Seq2[DeliveryRecord, error] {
	return func(yield func(DeliveryRecord, error) bool) {
		q := url.Values{}
		for _, o := range opts {
			o(q)
		}
		path := withMinPosition("/v1/webhook-endpoints/"+url.PathEscape(endpointID)+"/deliveries", q, call{})
		var page deliveryPage
		if _, err := c.read(ctx, path, &page); err != nil {
			yield(DeliveryRecord{}, err)
			return
		}
		for _, d := range page.Deliveries {
			if !yield(d, nil) {
				return
			}
		}
	}
}
