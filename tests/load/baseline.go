package load

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/acme/orders/idempotency"
	"github.com/labstack/echo/v4"
	"github.com/oklog/ulid/v2"
)

// Baseline returns the yardstick of the load figures: an echo server with the command routes
// of the order service that checks the Idempotency-Key's form, decodes the same JSON bodies as
// strictly, and answers with an order of the same shape, storing nothing. Its throughput is
// what HTTP, routing and JSON cost on the machine, with the same clients.
func Baseline() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	route := func(status string, body func() any) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := idempotency.ValidateKey(c.Request().Header.Get("Idempotency-Key")); err != nil {
				return c.JSON(http.StatusBadRequest, map[string]string{"type": "/problems/idempotency-key-invalid"})
			}
			if err := decodeStrict(c.Request().Body, body()); err != nil {
				return c.JSON(http.StatusBadRequest, map[string]string{"type": "/problems/malformed-request", "detail": err.Error()})
			}
			id, code := c.Param("id"), http.StatusOK
			if id == "" {
				id, code = ulid.Make().String(), http.StatusCreated
				c.Response().Header().Set("Location", "/v1/orders/"+id)
			}
			now := time.Now().UTC()
			out, _ := json.Marshal(baselineOrder{ID: id, CustomerID: "c", Currency: "EUR", Status: status,
				Lines: []lineBody{{SKU: "sku-1", Quantity: 1, UnitPrice: 100}}, Total: 100, Version: 1, CreatedAt: now, UpdatedAt: now})
			h := c.Response().Header()
			h.Set("ETag", `"0"`)
			h.Set("Log-Position", "1")
			return c.Blob(code, echo.MIMEApplicationJSON, append(out, '\n'))
		}
	}
	e.POST("/v1/orders", route("created", func() any { return &createBody{} }))
	e.POST("/v1/orders/:id/lines", route("created", func() any { return &line{} }))
	e.POST("/v1/orders/:id/payments", route("paying", func() any {
		return &struct {
			PaymentID *string `json:"paymentId"`
			Amount    *int64  `json:"amount"`
		}{}
	}))
	e.POST("/v1/orders/:id/payments/:paymentId/confirm", route("paid", func() any {
		return &struct {
			Amount *int64 `json:"amount"`
		}{}
	}))
	reason := func() any {
		return &struct {
			Reason *string `json:"reason"`
		}{}
	}
	e.POST("/v1/orders/:id/payments/:paymentId/fail", route("created", reason))
	e.POST("/v1/orders/:id/cancel", route("cancelled", reason))
	e.POST("/v1/orders/:id/shipments", route("shipped", func() any {
		return &struct {
			Carrier        *string `json:"carrier"`
			TrackingNumber *string `json:"trackingNumber"`
		}{}
	}))
	e.POST("/v1/orders/:id/refunds", route("refunding", func() any {
		return &struct {
			RefundID *string `json:"refundId"`
			Amount   *int64  `json:"amount"`
		}{}
	}))
	e.POST("/v1/orders/:id/refunds/:refundId/complete", route("refunded", func() any { return &struct{}{} }))
	return e
}

// createBody is the body of a create-order command, decoded as strictly as the service does.
type createBody struct {
	CustomerID      *string `json:"customerId"`
	Currency        *string `json:"currency"`
	Lines           []line  `json:"lines"`
	ClientReference string  `json:"clientReference"`
}

type line struct {
	SKU       *string `json:"sku"`
	Quantity  *int64  `json:"quantity"`
	UnitPrice *int64  `json:"unitPrice"`
}

// decodeStrict decodes one JSON value from r into v, refusing unknown fields as the service does.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// baselineOrder has the shape of the service's order.
type baselineOrder struct {
	ID         string     `json:"id"`
	CustomerID string     `json:"customerId"`
	Currency   string     `json:"currency"`
	Status     string     `json:"status"`
	Lines      []lineBody `json:"lines"`
	Total      int64      `json:"total"`
	Paid       int64      `json:"paid"`
	Refunded   int64      `json:"refunded"`
	Version    int64      `json:"version"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}
