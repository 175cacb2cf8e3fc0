package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/webhooks"
)

// Every error a package hands to api becomes its problem through its kind (package fault):
// the type, the status, and whether a keyed command's answer with it is kept for replays.
func TestProblemOfEachKind(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("doing something: %w", err) }
	for _, c := range []struct {
		err    error
		code   string
		status int
		final  bool
	}{
		{nil, "", 0, true},
		{wrap(errMalformed), "malformed-request", 400, true},
		{idempotency.ErrKeyMissing, "idempotency-key-missing", 400, true},
		{idempotency.ErrKeyInvalid, "idempotency-key-invalid", 400, true},
		{&order.Error{Kind: order.KindInvalid, Msg: "bad"}, "invalid-command", 400, true},
		{wrap(errUnauthorized), "unauthorized", 401, true},
		{wrap(errForbidden), "forbidden", 403, true},
		{wrap(errOrderNotFound), "not-found", 404, true},
		{&order.Error{Kind: order.KindNotFound, Msg: "no line"}, "not-found", 404, true},
		{wrap(webhooks.ErrNotFound), "not-found", 404, true},
		{wrap(idempotency.ErrInFlight), "idempotency-key-in-flight", 409, false},
		{idempotency.ErrTakenOver, "idempotency-key-in-flight", 409, false},
		{&order.Error{Kind: order.KindInvalidTransition, Msg: "shipped"}, "invalid-transition", 409, true},
		{&order.Error{Kind: order.KindAlreadyExists, Msg: "exists"}, "invalid-transition", 409, true},
		{wrap(command.ErrConflict), "concurrent-modification", 409, false},
		{wrap(errRebuildRunning), "rebuild-in-progress", 409, false},
		{wrap(command.ErrPreconditionFailed), "precondition-failed", 412, true},
		{wrap(fault.KeyReused), "idempotency-key-reused", 422, true},
		{&order.Error{Kind: order.KindRejected, Msg: "amount"}, "command-rejected", 422, true},
		{wrap(command.ErrClientRefTaken), "command-rejected", 422, true},
		{wrap(command.ErrPaymentIDTaken), "payment-id-taken", 422, true},
		{wrap(webhooks.ErrInvalid), "webhook-endpoint-invalid", 422, true},
		{wrap(webhooks.ErrURLRefused), "webhook-url-refused", 422, true},
		{wrap(webhooks.ErrLimit), "webhook-endpoint-limit", 422, true},
		{wrap(order.ErrUnknownEventType), "event-unreadable", 500, false},
		{wrap(order.ErrUpcast), "event-unreadable", 500, false},
		{wrap(eventstore.ErrUnavailable), "unavailable", 503, false},
		{wrap(webhooks.ErrContended), "unavailable", 503, false},
		{wrap(errBehind), "unavailable", 503, false},
		{wrap(context.DeadlineExceeded), "unavailable", 503, false},
		{errors.New("disk on fire"), "internal", 500, false},
	} {
		if got := fault.Final(c.err); got != c.final {
			t.Errorf("%v: final %v, want %v", c.err, got, c.final)
		}
		if c.err == nil {
			continue
		}
		if p := problemOf(c.err); p.Code() != c.code || p.Status != c.status {
			t.Errorf("%v: problem %s %d, want %s %d", c.err, p.Code(), p.Status, c.code, c.status)
		}
	}
}

// A kind's code names a problem type of the API: none falls back to internal.
func TestEveryKindHasAProblemType(t *testing.T) {
	for _, k := range []*fault.Kind{fault.Invalid, fault.Unauthorized, fault.Forbidden, fault.NotFound, fault.Rejected,
		fault.PreconditionFailed, fault.KeyReused, fault.TooLarge, fault.InFlight, fault.Conflict, fault.Unreadable, fault.Unavailable} {
		if _, ok := problemsByCode[fault.Code(k)]; !ok {
			t.Errorf("kind %q: code %q is no problem type", k, fault.Code(k))
		}
	}
}

// A contended webhook change changed nothing: a passing condition, answered 503 with
// Retry-After as every 5xx, never a 500.
func TestContendedWebhookChangeIsUnavailable(t *testing.T) {
	p := problemOf(fmt.Errorf("register webhook endpoint e: %w", webhooks.ErrContended))
	if p.Status != http.StatusServiceUnavailable || p.Code() != "unavailable" {
		t.Errorf("problem %+v; want 503 unavailable", p)
	}
}
