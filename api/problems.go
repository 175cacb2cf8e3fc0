package api

import (
	"context"
	"errors"
	"net/http"
	"os"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/labstack/echo/v4"
)

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`

	code string // the problem type's code, for metrics and logs
}

// Code is the problem's code: the last segment of its type.
func (p Problem) Code() string { return p.code }

// problemType is one kind of error: its code (the last segment of its type URI), status,
// title and a description served at /problems/{code}.
type problemType struct {
	code, title, about string
	status             int
}

// problemTypes is the closed set of errors the API returns. Codes are a public contract.
var problemTypes = []problemType{
	{"idempotency-key-missing", "Idempotency-Key required", "Every POST must carry an Idempotency-Key header.", http.StatusBadRequest},
	{"idempotency-key-invalid", "Invalid Idempotency-Key", "An Idempotency-Key is 1 to 255 printable ASCII characters.", http.StatusBadRequest},
	{"malformed-request", "Malformed request", "The request body is not valid JSON for this route (syntax, types, unknown or missing fields), or a path value is invalid.", http.StatusBadRequest},
	{"provider-event-malformed", "Provider event malformed", "A payment provider's delivery is signed, but is not an event of its provider's scheme (no event id or type, or an event of a type the service acts on without the fields it needs).", http.StatusBadRequest},
	{"invalid-command", "Invalid command", "The order service finds the command invalid on its own (a bad currency, a quantity out of range, ...).", http.StatusBadRequest},
	{"unauthorized", "Unauthorized", "The request needs a valid bearer API key.", http.StatusUnauthorized},
	{"delivery-unverified", "Delivery unverified", "A payment provider's delivery names no provider of the providers file, or its signature does not verify with the provider's secrets, or its signed timestamp is more than 5 minutes from now. Nothing was recorded.", http.StatusUnauthorized},
	{"forbidden", "Forbidden", "The API key is valid, but none of its roles (client, auditor, admin) may call this route; or, in development mode, the request's Host is not a loopback name.", http.StatusForbidden},
	{"not-found", "Not found", "No such route or order.", http.StatusNotFound},
	{"method-not-allowed", "Method not allowed", "The route does not support this method.", http.StatusMethodNotAllowed},
	{"idempotency-key-in-flight", "Request in progress", "Another request with this Idempotency-Key is still running; retry after the Retry-After delay.", http.StatusConflict},
	{"invalid-transition", "Invalid transition", "The order's status does not allow this command.", http.StatusConflict},
	{"too-early", "Too early", "A payment provider's event that the order cannot take yet, and will once an event the provider sent earlier arrives (a refund before the success of the payment it refunds); retry after the Retry-After delay.", http.StatusConflict},
	{"concurrent-modification", "Concurrent modification", "The order kept changing while the command ran; it was not applied. Retry.", http.StatusConflict},
	{"rebuild-in-progress", "Rebuild in progress", "The projection is rebuilding with other options (compare, swap); wait for that rebuild to end.", http.StatusConflict},
	{"precondition-failed", "Precondition failed", "If-Match does not match the order's current ETag.", http.StatusPreconditionFailed},
	{"payload-too-large", "Payload too large", "The request body is larger than 1 MiB.", http.StatusRequestEntityTooLarge},
	{"unsupported-media-type", "Unsupported media type", "Request bodies must be application/json.", http.StatusUnsupportedMediaType},
	{"idempotency-key-reused", "Idempotency-Key reused", "This Idempotency-Key was already used for a different request (another body, route or order).", http.StatusUnprocessableEntity},
	{"command-rejected", "Command rejected", "The order's facts refuse the command (an amount that is not the total, a second payment, ...).", http.StatusUnprocessableEntity},
	{"payment-id-taken", "Payment id taken", "Another of the client's orders already started a payment with this payment id: a payment id belongs to one order, so that the provider's callback finds it.", http.StatusUnprocessableEntity},
	{"webhook-endpoint-invalid", "Invalid webhook endpoint", "The endpoint's event types are missing or unknown (see the WebhookEventType schema).", http.StatusUnprocessableEntity},
	{"webhook-url-refused", "Webhook URL refused", "A webhook URL must be an absolute https URL whose host resolves to globally reachable addresses only: none in a special-purpose range of the IANA registries (loopback, private, shared, link-local, documentation, reserved...).", http.StatusUnprocessableEntity},
	{"webhook-endpoint-limit", "Too many webhook endpoints", "The client has as many webhook endpoints as it may (1,000 by default); delete one first.", http.StatusUnprocessableEntity},
	{"webhook-secret-withdrawn", "Webhook secret withdrawn", "The Idempotency-Key's first answer held a signing secret that is no longer shown: the endpoint is deleted, the secret was rotated since, or the key is older than the key TTL. Rotate the secret (the endpoint's owner) for a new one.", http.StatusUnprocessableEntity},
	{"headers-too-large", "Request headers too large", "The request's headers are larger than 64 KiB.", http.StatusRequestHeaderFieldsTooLarge},
	{"internal", "Internal error", "The server failed; the request id identifies it in the logs.", http.StatusInternalServerError},
	{"event-unreadable", "Event unreadable", "The order's log holds an event this release cannot read: a type it does not know, a version newer than it reads, or an earlier version its upcaster refuses. The detail names the stream and revision; a release that reads it must serve the order.", http.StatusInternalServerError},
	{"unavailable", "Service unavailable", "The event store cannot take writes, a read model cannot answer yet, or what the request changes kept changing under it (nothing was changed); retry after the Retry-After delay.", http.StatusServiceUnavailable},
}

// problemsByCode indexes problemTypes.
var problemsByCode = func() map[string]problemType {
	m := make(map[string]problemType, len(problemTypes))
	for _, p := range problemTypes {
		m[p.code] = p
	}
	return m
}()

// problemFor is the problem type of code; a code not in the table is a bug, answered as
// internal rather than with a made-up type.
func problemFor(code string) problemType {
	if p, ok := problemsByCode[code]; ok {
		return p
	}
	return problemsByCode["internal"]
}

// problem builds the problem of code with detail.
func problem(code, detail string) Problem {
	p := problemFor(code)
	if detail == "" {
		detail = p.about
	}
	return Problem{Type: "/problems/" + p.code, Title: p.title, Status: p.status, Detail: detail, code: p.code}
}

// problemOf maps an error to its problem: the one place where errors become HTTP. An error's
// kind and code (package fault) name its problem type; its detail is the error's message, but
// for the domain's refusals (their Msg) and the few causes a client must not read.
func problemOf(err error) Problem {
	var oe *order.Error
	switch {
	case errors.Is(err, command.ErrConflict):
		return problem(fault.Code(err), "the order kept changing; retry")
	case errors.Is(err, eventstore.ErrUnavailable):
		return problem(fault.Code(err), "the event store cannot take writes now")
	case errors.As(err, &oe):
		return problem(fault.Code(err), oe.Msg)
	case fault.Of(err) != nil:
		return problem(fault.Code(err), err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return problem("unavailable", "the request took longer than the server allows; retry")
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection's read deadline: the client sent its body too slowly.
		return problem("malformed-request", "the request body did not arrive in time")
	}
	if he, ok := errors.AsType[*echo.HTTPError](err); ok {
		if p, ok := httpProblem(he.Code); ok {
			return p
		}
	}
	return problem("internal", "internal error")
}

// httpProblem is the problem of a status that echo answered with itself (no route, a body too
// large, ...), if it is one the API names.
func httpProblem(status int) (Problem, bool) {
	switch status {
	case http.StatusNotFound:
		return problem("not-found", "no such route"), true
	case http.StatusMethodNotAllowed:
		return problem("method-not-allowed", ""), true
	case http.StatusRequestEntityTooLarge:
		return problem("payload-too-large", ""), true
	case http.StatusUnsupportedMediaType:
		return problem("unsupported-media-type", ""), true
	case http.StatusUnauthorized:
		return problem("unauthorized", ""), true
	case http.StatusBadRequest:
		return problem("malformed-request", ""), true
	}
	return Problem{}, false
}
