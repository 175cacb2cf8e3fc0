package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/oklog/ulid/v2"
)

// CreateOrder creates an order; the service assigns its id.
func (c *Client) CreateOrder(ctx context.Context, req CreateOrderRequest, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, "/v1/orders", req, opts)
}

// AddLine adds a line to an order, or adds to the quantity of its line of the same SKU and price.
func (c *Client) AddLine(ctx context.Context, orderID string, line LineInput, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "lines"), line, opts)
}

// StartPayment moves an order to paying through the provider's payment; its amount must be the
// order's total.
func (c *Client) StartPayment(ctx context.Context, orderID string, req StartPaymentRequest, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "payments"), req, opts)
}

// ConfirmPayment records that the provider captured amount for the order's payment paymentID,
// moving the order to paid.
func (c *Client) ConfirmPayment(ctx context.Context, orderID, paymentID string, amount Money, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "payments", paymentID, "confirm"), confirmPaymentRequest{amount}, opts)
}

// Cancel cancels an order that is created or paying, for reason.
func (c *Client) Cancel(ctx context.Context, orderID, reason string, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "cancel"), reasonRequest{reason}, opts)
}

// Ship moves a paid order to shipped.
func (c *Client) Ship(ctx context.Context, orderID string, req ShipRequest, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "shipments"), req, opts)
}

// RequestRefund moves a paid or shipped order to refunding.
func (c *Client) RequestRefund(ctx context.Context, orderID string, req RequestRefundRequest, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "refunds"), req, opts)
}

// CompleteRefund records that the refund refundID was paid out, moving the order to refunded.
func (c *Client) CompleteRefund(ctx context.Context, orderID, refundID string, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "refunds", refundID, "complete"), struct{}{}, opts)
}

// ChangeLineQuantity sets the quantity of the order's line for sku; setting the quantity it has
// changes nothing.
func (c *Client) ChangeLineQuantity(ctx context.Context, orderID, sku string, quantity int, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPut, orderPath(orderID, "lines", sku), changeLineQuantityRequest{quantity}, opts)
}

// RemoveLine removes the order's line for sku.
func (c *Client) RemoveLine(ctx context.Context, orderID, sku string, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodDelete, orderPath(orderID, "lines", sku), nil, opts)
}

// FailPayment records that the order's payment paymentID failed, for reason, moving the order
// back to created.
func (c *Client) FailPayment(ctx context.Context, orderID, paymentID, reason string, opts ...CallOption) (Order, Meta, error) {
	return c.command(ctx, http.MethodPost, orderPath(orderID, "payments", paymentID, "fail"), reasonRequest{reason}, opts)
}

// ConfirmPaymentByID is ConfirmPayment for a provider that knows only its payment id: the
// service finds the caller's order that started payment paymentID. If its payments lookup does
// not know the payment yet, the call ends with ErrNotFound (after the service waited up to 2 s
// for the lookup to catch up); that answer is not stored under the Idempotency-Key, so sending
// the call again with WithIdempotencyKey(meta.IdempotencyKey) looks the payment up again.
func (c *Client) ConfirmPaymentByID(ctx context.Context, paymentID string, amount Money, opts ...CallOption) (Order, Meta, error) {
	path := "/v1/payments/" + url.PathEscape(paymentID) + "/confirm"
	return c.command(ctx, http.MethodPost, path, confirmPaymentRequest{amount}, opts)
}

// GetOrder reads an order from the orders read model.
func (c *Client) GetOrder(ctx context.Context, orderID string, opts ...CallOption) (Order, Meta, error) {
	var o Order
	meta, err := c.read(ctx, withMinPosition(orderPath(orderID), nil, c.callOptions(opts)), &o)
	if err != nil {
		return Order{}, meta, err
	}
	return o, meta, nil
}

// ListOptions filters ListOrders.
type ListOptions struct {
	Status     string // only orders in this status, such as StatusPaid
	CustomerID string // only orders of this customer
	PageSize   int    // orders per page, 1–500; 0 for the service's default (50)
}

// ListOrders returns the orders, newest first, fetching one page at a time as the loop asks
// for more. An error ends the sequence; the loop may stop early.
func (c *Client) ListOrders(ctx context.Context, filter ListOptions, opts ...CallOption) iter.Seq2[Order, error] {
	return func(yield func(Order, error) bool) {
		o := c.callOptions(opts)
		q := url.Values{}
		setIf(q, "status", filter.Status)
		setIf(q, "customerId", filter.CustomerID)
		if filter.PageSize > 0 {
			q.Set("limit", strconv.Itoa(filter.PageSize))
		}
		for {
			var page orderPage
			if _, err := c.read(ctx, withMinPosition("/v1/orders", q, o), &page); err != nil {
				yield(Order{}, err)
				return
			}
			for _, ord := range page.Orders {
				if !yield(ord, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			q.Set("cursor", page.Next)
		}
	}
}

// Events returns an order's events, oldest first, fetching one page at a time as the loop asks
// for more. They come from the order's stream, not a read model. An error ends the sequence.
func (c *Client) Events(ctx context.Context, orderID string) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		q := url.Values{}
		for {
			var page eventPage
			if _, err := c.read(ctx, withMinPosition(orderPath(orderID, "events"), q, call{}), &page); err != nil {
				yield(Event{}, err)
				return
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
			if page.Next == nil {
				return
			}
			q.Set("fromRevision", strconv.FormatInt(*page.Next, 10))
		}
	}
}

// command sends a command as one logical call: one Idempotency-Key for every attempt. A nil
// body sends none.
func (c *Client) command(ctx context.Context, method, path string, body any, opts []CallOption) (Order, Meta, error) {
	o := c.callOptions(opts)
	key := o.key
	if key == "" {
		key = ulid.Make().String()
	}
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return Order{}, Meta{}, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	var ord Order
	meta, err := c.send(ctx, request{method: method, path: path, body: data, key: key, call: o}, &ord)
	if err != nil {
		return Order{}, meta, err
	}
	if c.session != nil {
		c.session.observe(meta.LogPosition)
	}
	return ord, meta, nil
}

// read sends a GET, retried like a command's attempts, and decodes its answer into v.
func (c *Client) read(ctx context.Context, path string, v resource) (Meta, error) {
	return c.send(ctx, request{method: http.MethodGet, path: path}, v)
}

// send carries out req and decodes its answer into v: the one path of every call's answer.
func (c *Client) send(ctx context.Context, req request, v resource) (Meta, error) {
	var meta Meta
	ans, err := c.do(ctx, req, &meta)
	if err != nil {
		return meta, err
	}
	if err := decode(ans, v, &meta); err != nil {
		return meta, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	return meta, nil
}

// resource is the body a call promises. check reports what a decoded body lacks that every
// such resource has: JSON decoding alone takes "{}" or null for an empty one.
type resource interface{ check() error }

// decode reads a 2xx answer's headers into meta and its body into v. A body that is not
// application/json, or not the resource v promises, is ErrMalformedAnswer, which is not retried:
// an answer that is not the service's (a proxy's page, a wrong base URL) would most likely come
// again, and one that is would only be replayed to a retry with the same key.
func decode(ans *answer, v resource, meta *Meta) error {
	meta.Replayed = ans.header.Get("Idempotent-Replayed") == "true"
	meta.ETag = ans.header.Get("ETag")
	meta.RequestID = ans.header.Get("X-Request-Id")
	meta.LogPosition, _ = strconv.ParseUint(ans.header.Get("Log-Position"), 10, 64)
	ct := ans.header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return fmt.Errorf("%w: %d with Content-Type %q", ErrMalformedAnswer, ans.status, ct)
	}
	err := json.Unmarshal(ans.body, v)
	if err == nil {
		err = v.check()
	}
	if err != nil {
		return fmt.Errorf("%w: %d: %w", ErrMalformedAnswer, ans.status, err)
	}
	return nil
}

// orderPath is /v1/orders/{id}/… with every value escaped as one path segment.
func orderPath(orderID string, rest ...string) string {
	p := "/v1/orders/" + url.PathEscape(orderID)
	for i, s := range rest {
		if i%2 == 0 {
			p += "/" + s // a literal segment
		} else {
			p += "/" + url.PathEscape(s)
		}
	}
	return p
}

// withMinPosition is path with query q and the call's minPosition.
func withMinPosition(path string, q url.Values, o call) string {
	if o.minPosition > 0 {
		q = cloneValues(q)
		q.Set("minPosition", strconv.FormatUint(o.minPosition, 10))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func setIf(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}
