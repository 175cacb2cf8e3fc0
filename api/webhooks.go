package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/access"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/fault"

	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/keyed"
	"github.com/acme/orders/webhooks"
	"github.com/labstack/echo/v4"
)

// errWebhooksOff: the server runs without a webhook secret key, so it can neither seal nor
// sign secrets.
var errWebhooksOff = fmt.Errorf("%w: webhooks are off: the server has no webhook secret key (--webhooks-secret-key-file)", errUnavailable)

var errUnavailable = fault.New(fault.Unavailable, "", "unavailable")

// endpointBody registers an endpoint.
type endpointBody struct {
	URL         *string  `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description"`
}

// endpointView is an endpoint as answered; Secret only where it is shown (registration,
// rotation).
type endpointView struct {
	ID             string    `json:"id"`
	Principal      string    `json:"principal"`
	URL            string    `json:"url"`
	Events         []string  `json:"events"`
	Description    string    `json:"description"`
	Status         string    `json:"status"`
	DisabledReason string    `json:"disabledReason,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	Secret         string    `json:"secret,omitempty"`
}

func viewEndpoint(ep webhooks.Endpoint, secret string) endpointView {
	return endpointView{ID: ep.ID, Principal: ep.Principal, URL: ep.URL, Events: ep.Events, Description: ep.Description,
		Status: ep.Status, DisabledReason: ep.DisabledReason, CreatedAt: ep.CreatedAt.UTC(), Secret: secret}
}

func (s *Server) addWebhookRoutes(e *echo.Echo, get func(string, echo.HandlerFunc, ...echo.MiddlewareFunc)) {
	auth := s.authenticate
	e.POST("/v1/webhook-endpoints", s.registerEndpoint, auth)
	get("/v1/webhook-endpoints", s.listEndpoints, auth)
	get("/v1/webhook-endpoints/:id", s.getEndpoint, auth)
	e.DELETE("/v1/webhook-endpoints/:id", s.setEndpointStatus(webhooks.StatusDeleted), auth)
	e.POST("/v1/webhook-endpoints/:id/disable", s.setEndpointStatus(webhooks.StatusDisabled), auth)
	e.POST("/v1/webhook-endpoints/:id/enable", s.setEndpointStatus(webhooks.StatusEnabled), auth)
	e.POST("/v1/webhook-endpoints/:id/rotate-secret", s.rotateSecret, auth)
	get("/v1/webhook-endpoints/:id/deliveries", s.listDeliveries, auth)
	e.POST("/v1/webhook-endpoints/:id/deliveries/:deliveryId/retry", s.retryDelivery, auth)
}

// webhookKey is the request's Idempotency-Key: required on a POST that is not naturally
// idempotent, optional elsewhere.
func webhookKey(c echo.Context, required bool) (string, error) {
	key, ok := c.Request().Header["Idempotency-Key"]
	switch {
	case !ok && required:
		return "", idempotency.ErrKeyMissing
	case !ok:
		return "", nil
	case len(key) != 1 || idempotency.ValidateKey(key[0]) != nil:
		return "", idempotency.ErrKeyInvalid
	}
	return key[0], nil
}

func (s *Server) registerEndpoint(c echo.Context) error {
	if s.Webhooks == nil {
		return errWebhooksOff
	}
	req := c.Request()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return err
	}
	if !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return echo.ErrUnsupportedMediaType
	}
	key, err := webhookKey(c, true)
	if err != nil {
		return err
	}
	var b endpointBody
	if err := decode(body, &b); err != nil {
		return err
	}
	if err := required(map[string]bool{"url": b.URL != nil, "events": b.Events != nil}); err != nil {
		return err
	}
	if len(b.Description) > 1024 {
		return fmt.Errorf("%w: description: longer than 1024 bytes", errMalformed)
	}
	if b.Description != "" && !order.IsText(b.Description) {
		return fmt.Errorf("%w: description: must be printable text on one line, without leading or trailing spaces", errMalformed)
	}
	es := s.Webhooks.Endpoints
	if err := es.Check(req.Context(), *b.URL, b.Events); err != nil {
		return err
	}
	id := webhooks.EndpointID(principal(c), key)
	reg := keyed.Registration{Endpoints: es, Principal: principal(c), URL: *b.URL, Events: b.Events,
		Description: b.Description, Render: renderRegistration}
	return s.endpointChange(c, key, id, body, reg, "")
}

// endpointChange runs a keyed change of endpoint id through the pipeline and writes its
// answer: a success with the secret it drew (the registration's, or the rotation's with key
// rotation), while it may be shown, as the answer stored holds none.
func (s *Server) endpointChange(c echo.Context, key, id string, body []byte, w keyed.Work, rotation string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), commandTimeout)
	defer cancel()
	ans, err := s.pipeline().Do(ctx, s.endpointRequest(c, key, id, body), keyed.Ready(w))
	switch {
	case err != nil:
		return err
	case ans.Outcome.Status >= 300:
		return s.write(c, ans.Outcome, ans.Replayed)
	}
	ep, secret, err := s.Webhooks.Endpoints.Shown(ctx, id, rotation)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	if ans.Outcome.Status == http.StatusCreated {
		h.Set(echo.HeaderLocation, "/v1/webhook-endpoints/"+ep.ID)
	}
	if ans.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	return c.JSON(ans.Outcome.Status, viewEndpoint(ep, secret))
}

// endpointRequest is what the pipeline needs to know of a keyed change of endpoint id.
func (s *Server) endpointRequest(c echo.Context, key, id string, body []byte) idempotency.Request {
	req := c.Request()
	fp, _ := idempotency.Fingerprint(req.Method, req.URL.Path, body) // JSON, or none: checked before
	return idempotency.Request{Principal: principal(c), Key: key, Method: req.Method, Path: req.URL.Path,
		Fingerprint: fp, Digest: idempotency.DigestOf(req.Method, req.URL.Path, body),
		OrderID: id, Claimant: s.Node + "/" + requestID(c)}
}

// renderRegistration is the answer to a registration, as stored and replayed: without the
// endpoint's secret.
func renderRegistration(ep webhooks.Endpoint, err error) idempotency.Outcome {
	return renderEndpoint(http.StatusCreated, ep, err)
}

// renderEndpoint is the answer to a keyed change of ep: status with the endpoint, without its
// secret, or the problem of err.
func renderEndpoint(status int, ep webhooks.Endpoint, err error) idempotency.Outcome {
	if err != nil {
		return problemOutcome(err)
	}
	body, _ := json.Marshal(viewEndpoint(ep, "")) // strings and a time: no error
	return idempotency.Outcome{Status: status, Body: string(body) + "\n",
		Headers: map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON}}
}

// readsAll reports whether the caller reads every principal's endpoints; changesAll, whether
// it changes them.
func readsAll(c echo.Context) bool   { return roles(c).Has(access.RoleAuditor | access.RoleAdmin) }
func changesAll(c echo.Context) bool { return roles(c).Has(access.RoleAdmin) }

func (s *Server) listEndpoints(c echo.Context) error {
	if s.Webhooks == nil {
		return errWebhooksOff
	}
	if err := s.Webhooks.Endpoints.Refresh(c.Request().Context()); err != nil {
		return err
	}
	eps := s.Webhooks.Endpoints.List(principal(c), readsAll(c))
	page := struct {
		Endpoints []endpointView `json:"endpoints"`
	}{Endpoints: make([]endpointView, len(eps))}
	for i, ep := range eps {
		page.Endpoints[i] = viewEndpoint(ep, "")
	}
	return c.JSON(http.StatusOK, page)
}

// endpoint is the endpoint of the path's id, if the caller may see it.
func (s *Server) endpoint(c echo.Context, all bool) (webhooks.Endpoint, error) {
	if s.Webhooks == nil {
		return webhooks.Endpoint{}, errWebhooksOff
	}
	id, err := pathValue(c, "id")
	if err != nil {
		return webhooks.Endpoint{}, err
	}
	if _, err := s.Webhooks.Endpoints.Get(id, principal(c), all); err != nil {
		if err := s.Webhooks.Endpoints.Reload(c.Request().Context(), id); err != nil {
			return webhooks.Endpoint{}, err
		}
	}
	return s.Webhooks.Endpoints.Get(id, principal(c), all)
}

func (s *Server) getEndpoint(c echo.Context) error {
	ep, err := s.endpoint(c, readsAll(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, viewEndpoint(ep, ""))
}

// setEndpointStatus disables, enables or deletes the endpoint: each naturally idempotent.
func (s *Server) setEndpointStatus(status string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.Webhooks == nil {
			return errWebhooksOff
		}
		if _, err := webhookKey(c, false); err != nil {
			return err
		}
		id, err := pathValue(c, "id")
		if err != nil {
			return err
		}
		reason := ""
		if status == webhooks.StatusDisabled {
			reason = "disabled by " + principal(c)
		}
		ep, err := s.Webhooks.Endpoints.SetStatus(c.Request().Context(), id, principal(c), changesAll(c), status, reason)
		if err != nil {
			return err
		}
		if status == webhooks.StatusDeleted {
			return c.NoContent(http.StatusNoContent)
		}
		return c.JSON(http.StatusOK, viewEndpoint(ep, ""))
	}
}

func (s *Server) rotateSecret(c echo.Context) error {
	if s.Webhooks == nil {
		return errWebhooksOff
	}
	key, err := webhookKey(c, true)
	if err != nil {
		return err
	}
	id, err := pathValue(c, "id")
	if err != nil {
		return err
	}
	rot := keyed.Rotation{Endpoints: s.Webhooks.Endpoints, Principal: principal(c), All: changesAll(c), Key: key, Render: renderRotation}
	return s.endpointChange(c, key, id, nil, rot, key)
}

// renderRotation is the answer to a rotation, as stored and replayed: without the secret.
func renderRotation(ep webhooks.Endpoint, err error) idempotency.Outcome {
	return renderEndpoint(http.StatusOK, ep, err)
}

// deliveryView is a delivery as answered.
type deliveryView struct {
	ID       string             `json:"id"`
	Type     string             `json:"type"`
	OrderID  string             `json:"orderId"`
	Revision uint64             `json:"revision"`
	Status   string             `json:"status"`
	Tries    int                `json:"tries"`
	Next     *time.Time         `json:"nextAttemptAt,omitempty"`
	At       *time.Time         `json:"deadLetteredAt,omitempty"`
	Attempts []webhooks.Attempt `json:"attempts"`
}

func viewDelivery(d webhooks.Delivery, status string) deliveryView {
	v := deliveryView{ID: d.ID, Type: d.Type, OrderID: d.OrderID, Revision: d.Revision, Status: status, Tries: d.Tries, Attempts: d.Attempts}
	if v.Attempts == nil {
		v.Attempts = []webhooks.Attempt{}
	}
	return v
}

func (s *Server) listDeliveries(c echo.Context) error {
	ep, err := s.endpoint(c, readsAll(c))
	if err != nil {
		return err
	}
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return fmt.Errorf("%w: limit must be 1 to 1000", errMalformed)
		}
	}
	page := struct {
		Deliveries []deliveryView `json:"deliveries"`
	}{Deliveries: []deliveryView{}}
	switch status := c.QueryParam("status"); status {
	case "", "failed":
		dead, err := s.Webhooks.DeadLetters(c.Request().Context(), ep.ID, limit)
		if err != nil {
			return err
		}
		for _, d := range dead {
			v := viewDelivery(d.Delivery, "failed")
			v.At = &d.At
			page.Deliveries = append(page.Deliveries, v)
		}
	case "pending":
		pending, err := s.Webhooks.Pending(c.Request().Context(), ep.ID)
		if err != nil {
			return err
		}
		for _, d := range pending[:min(limit, len(pending))] {
			v := viewDelivery(d, "pending")
			v.Next = &d.Next
			page.Deliveries = append(page.Deliveries, v)
		}
	default:
		return fmt.Errorf("%w: status must be failed or pending", errMalformed)
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) retryDelivery(c echo.Context) error {
	ep, err := s.endpoint(c, changesAll(c))
	if err != nil {
		return err
	}
	id, err := pathValue(c, "deliveryId")
	if err != nil {
		return err
	}
	if err := s.Webhooks.Retry(c.Request().Context(), ep.ID, id, principal(c)); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "retrying"})
}
