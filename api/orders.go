package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

// orderView is an order as the API shows it.
type orderView struct {
	ID               string       `json:"id"`
	CustomerID       string       `json:"customerId"`
	Currency         string       `json:"currency"`
	ClientReference  string       `json:"clientReference,omitempty"`
	Channel          string       `json:"channel"`
	Status           string       `json:"status"`
	Lines            []lineView   `json:"lines"`
	Total            int64        `json:"total"`
	Paid             int64        `json:"paid"`
	Refunded         int64        `json:"refunded"`
	PaymentID        string       `json:"paymentId,omitempty"`
	RefundID         string       `json:"refundId,omitempty"`
	Carrier          string       `json:"carrier,omitempty"`
	TrackingNumber   string       `json:"trackingNumber,omitempty"`
	DuplicateCharges []chargeView `json:"duplicateCharges,omitempty"`
	// An order records every duplicate charge, however many: the answer shows the first
	// ShownCharges, their count and total, and where the rest are.
	DuplicateChargeCount  int       `json:"duplicateChargeCount,omitempty"`
	DuplicateChargeTotal  int64     `json:"duplicateChargeTotal,omitempty"`
	DuplicateChargeEvents string    `json:"duplicateChargeEvents,omitempty"` // only if some are not shown
	Version               int64     `json:"version"`
	CreatedAt             time.Time `json:"createdAt"`
	UpdatedAt             time.Time `json:"updatedAt"`
}

type lineView struct {
	SKU       string `json:"sku"`
	Name      string `json:"name,omitempty"`
	Quantity  int64  `json:"quantity"`
	UnitPrice int64  `json:"unitPrice"`
}

type chargeView struct {
	PaymentID string `json:"paymentId"`
	Amount    int64  `json:"amount"`
	Reason    string `json:"reason"`
}

func viewOrder(s order.State) orderView {
	v := orderView{
		ID: s.ID, CustomerID: s.CustomerID, Currency: string(s.Currency), ClientReference: s.ClientRef,
		Channel: s.Channel, Status: s.Status.String(), Lines: make([]lineView, len(s.Lines)),
		Total: s.Total.Amount, Paid: s.Paid.Amount, Refunded: s.Refunded.Amount,
		PaymentID: s.PaymentID, RefundID: s.RefundID, Carrier: s.Carrier, TrackingNumber: s.TrackingNumber,
		Version: s.Version, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	for i, l := range s.Lines {
		v.Lines[i] = lineView{SKU: l.SKU, Name: l.Name, Quantity: l.Quantity, UnitPrice: l.UnitPrice.Amount}
	}
	for c := range s.DuplicateCharges.All() {
		if len(v.DuplicateCharges) == ShownCharges {
			v.DuplicateChargeEvents = "/v1/orders/" + s.ID + "/events"
			break
		}
		v.DuplicateCharges = append(v.DuplicateCharges, chargeView{PaymentID: c.PaymentID, Amount: c.Amount.Amount, Reason: string(c.Reason)})
	}
	v.DuplicateChargeCount, v.DuplicateChargeTotal = s.DuplicateCharges.Len(), s.DuplicateCharges.Total().Amount
	return v
}

// ShownCharges is how many duplicate charges an order's answer lists (api/openapi.yaml), and
// a page of the console's.
const ShownCharges = 100

// OrderJSON is order s as the API shows it: what the console compares to show what an event
// changed, in the API's names and forms.
func OrderJSON(s order.State) ([]byte, error) { return json.Marshal(viewOrder(s)) }

// orderID returns the path's order id if it is a ULID.
func orderID(c echo.Context) (string, error) {
	id, err := pathValue(c, "id")
	if err != nil {
		return "", err
	}
	if _, err := ulid.ParseStrict(id); err != nil {
		return "", fmt.Errorf("%w: %s", errOrderNotFound, id)
	}
	return id, nil
}

// pathValue is the path value name, percent-decoded exactly once (RFC 3986): every handler
// reads path values through it, never through c.Param. echo matches a request on its raw path
// when that has escapes Go would write otherwise (an escaped '/' or '+', lower-case hex), and
// its values are then still escaped; on the decoded path otherwise, and they are decoded.
func pathValue(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	decoded, err := url.PathUnescape(v)
	if err != nil {
		// net/http refuses such a path before any handler runs; kept for other callers.
		return "", fmt.Errorf("%w: path value %s is not percent-encoded correctly", errMalformed, name)
	}
	return decoded, nil
}

type eventView struct {
	Revision   uint64          `json:"revision"`
	Position   uint64          `json:"position"`
	Type       string          `json:"type"`
	StoredType string          `json:"storedType,omitempty"` // only if Type is an upcast of it
	RecordedAt time.Time       `json:"recordedAt"`
	Data       json.RawMessage `json:"data"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
}

// getEvents answers a page of the order's stream: oldest first, or newest first with
// direction=backwards; fromRevision and limit page through it, and next is where the next
// page starts. Events stored at an earlier version of their type are shown upcast to the
// current one, with the stored type beside it.
func (s *Server) getEvents(c echo.Context) error {
	id, err := orderID(c)
	if err != nil {
		return err
	}
	opts, limit, err := eventsPage(c)
	if err != nil {
		return err
	}
	opts.Limit = limit + 1
	page := struct {
		Events []eventView `json:"events"`
		Next   *uint64     `json:"next,omitempty"`
	}{Events: []eventView{}}
	for e, err := range s.Orders.Events(c.Request().Context(), id, opts) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s", errOrderNotFound, id)
		}
		if err != nil {
			return err
		}
		if uint64(len(page.Events)) == limit {
			page.Next = &e.Revision
			break
		}
		var md json.RawMessage
		if len(e.Metadata) > 0 {
			md = e.Metadata
		}
		typ, data, err := order.Upcast(e.Type, e.Data)
		if err != nil {
			return fmt.Errorf("%s@%d: %w", e.Stream, e.Revision, err)
		}
		v := eventView{Revision: e.Revision, Position: e.Position.Commit, Type: typ, RecordedAt: e.Recorded, Data: data, Metadata: md}
		if typ != e.Type {
			v.StoredType = e.Type
		}
		page.Events = append(page.Events, v)
	}
	return c.JSON(http.StatusOK, page)
}

// eventsPage reads direction, fromRevision and limit (1 to 1000, default 1000).
func eventsPage(c echo.Context) (eventstore.ReadStreamOptions, uint64, error) {
	opts := eventstore.ReadStreamOptions{}
	switch c.QueryParam("direction") {
	case "", "forwards":
	case "backwards":
		opts.Direction, opts.From = eventstore.Backwards, eventstore.End
	default:
		return opts, 0, fmt.Errorf("%w: direction is forwards or backwards", errMalformed)
	}
	if v := c.QueryParam("fromRevision"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return opts, 0, fmt.Errorf("%w: fromRevision must be a revision", errMalformed)
		}
		opts.From = n
	}
	limit := uint64(1000)
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 1 || n > 1000 {
			return opts, 0, fmt.Errorf("%w: limit must be 1 to 1000", errMalformed)
		}
		limit = n
	}
	return opts, limit, nil
}
