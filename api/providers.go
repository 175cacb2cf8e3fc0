package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/fault"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/keyed"
	"github.com/acme/orders/providers"
	"github.com/labstack/echo/v4"
)

// SetProviders makes ps the payment providers whose events the server takes (nil: none). A
// reload of the providers file replaces them; deliveries in flight finish with the ones they
// were verified with.
func (s *Server) SetProviders(ps *providers.Set) { s.providerSet.Store(ps) }

// providerAnswer is the body of a provider event's answer, stored and replayed as every keyed
// command's.
type providerAnswer struct {
	Provider string `json:"provider"`
	EventID  string `json:"eventId"`
	// Outcome: applied (the order took it, now or before) or unapplied (recorded, on the
	// order or in the provider log, with the reason).
	Outcome string `json:"outcome"`
	OrderID string `json:"orderId,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// providerEvent serves POST /v1/provider-events/:provider: a payment provider's event, signed
// by the provider rather than sent with an API key. What can be checked without the body (the
// provider, the scheme's headers, the signed timestamp) is checked before the body is read,
// within a budget of its own; the signature is verified over the body's bytes before anything
// parses them. Then the event runs once per provider and event id, as the provider's
// principal, through the keyed pipeline: as the command it reports (order.ProviderEvent) on
// the order that started its payment, or, if it names no order of the principal or reports
// nothing the service acts on, as a record in the provider log (keyed.Unapplied). Either way
// the provider is answered 2xx, so that it stops; only what a retry can fix is not.
func (s *Server) providerEvent(c echo.Context) error {
	stateOf(c).command = order.ProviderEvent{}.CommandName()
	name := c.Param("provider")
	p, ok := s.providerSet.Load().Get(name)
	if !ok {
		s.countProviderEvent("", "unverified")
		return fmt.Errorf("%w: no payment provider %q", providers.ErrUnverified, name)
	}
	ev, err := s.verifiedEvent(c, p)
	if err != nil {
		return err
	}
	stateOf(c).Principal = p.Principal // for the request's log lines
	// The command runs to its end even if the provider hangs up (see command).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), commandTimeout)
	defer cancel()
	outcome, err := s.takeProviderEvent(c, ctx, p, ev)
	s.countProviderEvent(p.Name, outcome)
	return err
}

// takeProviderEvent answers ev, verified, and says what became of it, for the metrics.
func (s *Server) takeProviderEvent(c echo.Context, ctx context.Context, p providers.Provider, ev providers.Event) (outcome string, err error) {
	orderID, reason, err := s.providerOrder(ctx, p, ev)
	if err != nil {
		return "failed", err
	}
	// The event's key is answered first: a redelivery of an event recorded in the provider log
	// replays that record, even once the event's order is known.
	r := s.providerKeyRequest(c, p, ev, orderID)
	if reason != "" {
		r.OrderID = "" // the key names no order
	}
	if r.Key, err = s.providerEventKey(ctx, p, ev, r); err != nil {
		return "failed", err
	}
	var w keyed.Work = s.providerCommand(c, p, ev, r)
	if reason != "" {
		w = keyed.Unapplied{Event: providers.Unapplied{Provider: p.Name, Principal: p.Principal, EventID: ev.ID,
			EventType: ev.Type, PaymentID: ev.PaymentID, OrderID: orderID, Reason: reason, ReceivedAt: time.Now().UTC()},
			Render: renderUnapplied}
	}
	ans, err := s.pipeline().Do(ctx, r, keyed.Ready(w))
	noteCause(ctx, ans.Err)
	switch {
	case errors.Is(err, idempotency.ErrInFlight):
		return "retry", err
	case err != nil:
		return "failed", err
	}
	return providerOutcome(ans), s.write(c, ans.Outcome, ans.Replayed)
}

// verifiedEvent checks the headers of a delivery of p, then reads its body, verifies it and
// reads its event. The body is read within the providers' own budget (providerBodyBudget),
// and only once the headers could be the provider's: a sender without them, or with a stale
// timestamp, has none of its body read.
func (s *Server) verifiedEvent(c echo.Context, p providers.Provider) (providers.Event, error) {
	h := c.Request().Header
	if err := p.CheckHeaders(h, time.Now()); err != nil {
		s.countProviderEvent(p.Name, "unverified")
		return providers.Event{}, err
	}
	body, release, err := readBodyWithin(c, s.providerBodyBudget())
	if err != nil {
		return providers.Event{}, err
	}
	defer release()
	if err := p.Verify(h, body, time.Now()); err != nil {
		s.countProviderEvent(p.Name, "unverified")
		return providers.Event{}, err
	}
	ev, err := p.Read(h, body)
	if err == nil && (len(ev.ID) > order.MaxIDLen || strings.Contains(ev.ID, " ") || idempotency.ValidateKey(ev.ID) != nil) {
		err = fmt.Errorf("%w: event id %q is not 1 to %d printable ASCII characters without spaces", providers.ErrMalformed, ev.ID, order.MaxIDLen)
	}
	if err != nil {
		s.countProviderEvent(p.Name, "malformed")
		return providers.Event{}, err
	}
	return ev, nil
}

// providerKeySeparator separates the parts of a provider event's key. It is U+00B7, MIDDLE
// DOT: not printable ASCII, so that no client's Idempotency-Key can hold it
// (idempotency.ValidateKey) and no command of the principal's own can claim an event's key
// before the event comes. The provider's name ([a-z0-9-]) and the event id (printable ASCII,
// checked by verifiedEvent) hold none either, so the key reads back unambiguously.
const providerKeySeparator = "\u00b7"

// providerKey is the idempotency key of p's event ev among its principal's keys:
// provider·<provider>·<event id>. It names the provider because event ids are unique among
// one provider's events only: two providers of a principal may send events of the same id.
func providerKey(p providers.Provider, ev providers.Event) string {
	return "provider" + providerKeySeparator + p.Name + providerKeySeparator + ev.ID
}

// legacyProviderKey is the key that earlier releases gave ev, whatever its provider: one that
// a client's Idempotency-Key can also be.
func legacyProviderKey(ev providers.Event) string { return "provider:" + ev.ID }

// providerEventKey is the key that the delivery of p's event ev, with key request r, runs
// under: providerKey's, unless an earlier release recorded this very event under
// legacyProviderKey's. Then that key, so that a redelivery is answered as the first delivery
// was rather than applied again. The legacy key holds this event if its first claim has the
// delivery's fingerprint, which names the provider (its path) and the event as read: another
// provider's event of the same id, or a client's own command with that key, never matches.
// Once the key's stream is swept, past its TTL, the event's order tells it, as its events
// carry the key. It costs a read of a stream that is almost always missing, and one of the
// order's.
func (s *Server) providerEventKey(ctx context.Context, p providers.Provider, ev providers.Event, r idempotency.Request) (string, error) {
	legacy := legacyProviderKey(ev)
	e, found, err := eventstore.First(ctx, s.Keys.Store, idempotency.StreamName(p.Principal, legacy))
	if err != nil {
		return "", err
	}
	if found {
		// The first event of a key is its claim (idempotency.Claimed, or Recorded, which
		// holds one), whose fingerprint stands for the key's whole life.
		var first idempotency.Claimed
		if err := json.Unmarshal(e.Data, &first); err != nil {
			return "", fmt.Errorf("read the claim of %s: %w", e.Stream, err)
		}
		if first.Fingerprint == r.Fingerprint {
			return legacy, nil
		}
		return providerKey(p, ev), nil
	}
	if r.OrderID != "" {
		md := command.Metadata{Principal: p.Principal, IdempotencyKey: legacy, Fingerprint: r.Fingerprint}
		rep, err := s.Orders.Find(ctx, r.OrderID, order.ProviderEvent{}, md)
		if err != nil {
			return "", err
		}
		if rep != nil && !errors.Is(rep.Err, fault.KeyReused) {
			return legacy, nil
		}
	}
	return providerKey(p, ev), nil
}

// providerOrder finds the order of ev: the one of p's principal that started its payment, or
// the one its metadata names if the principal created it. reason, if not "", is why the event
// is not for any order: then it is recorded in the provider log.
func (s *Server) providerOrder(ctx context.Context, p providers.Provider, ev providers.Event) (orderID, reason string, err error) {
	if ev.Kind == providers.Unmapped {
		return ev.OrderID, fmt.Sprintf("the service does not act on events of type %q", ev.Type), nil
	}
	if id, ok, err := s.Orders.PaymentOrder(ctx, p.Principal, ev.PaymentID); err != nil || ok {
		return id, "", err
	}
	// Payments started before payment ids were claimed are in the lookups only.
	if id, ok, err := s.Reads.PaymentOrder(ctx, p.Principal, ev.PaymentID); err != nil || ok {
		return id, "", err
	}
	if ev.OrderID != "" && len(ev.OrderID) <= order.MaxIDLen && !strings.ContainsAny(ev.OrderID, " /") {
		owner, found, err := s.Orders.Owner(ctx, ev.OrderID)
		if err != nil || (found && owner == p.Principal) {
			return ev.OrderID, "", err
		}
	}
	return ev.OrderID, fmt.Sprintf("no order of %s started payment %q", p.Principal, ev.PaymentID), nil
}

// unappliedAnswer is the answer to an event recorded in the provider log.
func unappliedAnswer(u providers.Unapplied) providerAnswer {
	return providerAnswer{Provider: u.Provider, EventID: u.EventID, Outcome: "unapplied", Reason: u.Reason}
}

// providerKeyRequest is what the pipeline needs to know of the delivery of p's event ev, on
// order orderID ("" for none): its key is providerKey's, of p's principal (but see
// providerEventKey).
func (s *Server) providerKeyRequest(c echo.Context, p providers.Provider, ev providers.Event, orderID string) idempotency.Request {
	req := c.Request()
	return idempotency.Request{
		Principal: p.Principal, Key: providerKey(p, ev), Method: req.Method, Path: req.URL.Path,
		Fingerprint: providerFingerprint(req, ev), OrderID: orderID, Claimant: s.Node + "/" + requestID(c),
	}
}

// renderUnapplied is the answer to an event recorded in the provider log: the record that
// stands, or the problem of err.
func renderUnapplied(u providers.Unapplied, err error) idempotency.Outcome {
	if err != nil {
		return problemOutcome(err)
	}
	body, _ := json.Marshal(unappliedAnswer(u)) // strings only: no error
	return idempotency.Outcome{Status: http.StatusOK, Body: string(body) + "\n",
		Headers: map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON}}
}

// providerFingerprint is the fingerprint of ev's delivery: the event as read, not its bytes,
// which a provider may vary between deliveries of one event.
func providerFingerprint(req *http.Request, ev providers.Event) string {
	// The fields named here, not Event's, so that the fingerprints of stored keys stay.
	b, _ := json.Marshal(map[string]any{"id": ev.ID, "type": ev.Type, "paymentId": ev.PaymentID, "orderId": ev.OrderID,
		"refundId": ev.RefundID, "amount": ev.Amount.Amount, "currency": ev.Amount.Currency, "reason": ev.Reason})
	fp, _ := idempotency.Fingerprint(req.Method, req.URL.Path, b)
	return fp
}

// providerCommand is ev as the pipeline runs it with key request r: the command it reports on
// its order.
func (s *Server) providerCommand(c echo.Context, p providers.Provider, ev providers.Event, r idempotency.Request) keyed.OrderCommand {
	md := command.Metadata{Principal: r.Principal, CorrelationID: requestID(c), IdempotencyKey: r.Key, Fingerprint: r.Fingerprint}
	report := reportOf(ev)
	return keyed.OrderCommand{
		Command:  order.ProviderEvent{Provider: p.Name, EventID: ev.ID, EventType: ev.Type, Report: report},
		Metadata: md,
		Render: func(orderID string, res command.Result, err error) idempotency.Outcome {
			return s.renderProviderEvent(p, ev, orderID, res, err)
		},
	}
}

// renderProviderEvent is the answer to ev on order orderID: 200 with what became of it, once
// it is on the order (applied, or recorded as not); a problem if it could not run, with
// Retry-After if a retry may go otherwise (a refund before its payment's success).
func (s *Server) renderProviderEvent(p providers.Provider, ev providers.Event, orderID string, res command.Result, err error) idempotency.Outcome {
	a := providerAnswer{Provider: p.Name, EventID: ev.ID, Outcome: "applied", OrderID: orderID}
	var oe *order.Error
	switch {
	case err == nil:
	case errors.As(err, &oe) && oe.Kind != order.KindTooEarly && (len(res.Events) > 0 || res.Repeated):
		a.Outcome, a.Reason = "unapplied", oe.Msg // recorded on the order
	default:
		out := problemOutcome(err)
		if !fault.Final(err) {
			out.Headers["Retry-After"] = "1"
		}
		return out
	}
	body, _ := json.Marshal(a) // strings only: no error
	return idempotency.Outcome{
		Status:   http.StatusOK,
		Headers:  map[string]string{echo.HeaderContentType: echo.MIMEApplicationJSON},
		Position: res.Position.Commit,
		Body:     string(body) + "\n",
	}
}

// reportOf is the command ev reports, on the order of its payment.
func reportOf(ev providers.Event) order.Command {
	switch ev.Kind {
	case providers.PaymentSucceeded:
		return order.ConfirmPayment{PaymentID: ev.PaymentID, Amount: ev.Amount}
	case providers.PaymentFailed:
		return order.FailPayment{PaymentID: ev.PaymentID, Reason: ev.Reason}
	case providers.RefundSucceeded:
		return order.CompleteRefund{RefundID: ev.RefundID, Amount: ev.Amount}
	}
	return nil // unmapped: recorded in the provider log, never run
}

// providerOutcome is the metrics outcome of an answer to a provider event.
func providerOutcome(ans keyed.Answer) string {
	switch {
	case ans.Replayed:
		return "replayed"
	case ans.Outcome.Status == http.StatusConflict:
		return "retry"
	case ans.Outcome.Status != http.StatusOK:
		return "refused"
	}
	var a providerAnswer
	json.Unmarshal([]byte(ans.Outcome.Body), &a)
	return a.Outcome
}

// countProviderEvent counts a delivery of provider ("" for one that names none configured).
func (s *Server) countProviderEvent(provider, outcome string) {
	if s.Metrics != nil {
		s.Metrics.providerEvents.WithLabelValues(provider, outcome).Inc()
	}
}

// unappliedView is a provider's event that was not applied, as auditors list it.
type unappliedView struct {
	Provider   string    `json:"provider"`
	Principal  string    `json:"principal"`
	EventID    string    `json:"eventId"`
	EventType  string    `json:"eventType"`
	OrderID    string    `json:"orderId,omitempty"`
	Reason     string    `json:"reason"`
	RecordedAt time.Time `json:"recordedAt"`
}

// listUnapplied serves GET /v1/provider-events: the providers' events not applied, newest
// first, a page at a time (the cursor is the last one's log position).
func (s *Server) listUnapplied(c echo.Context) error {
	limit, err := pageLimit(c)
	if err != nil {
		return err
	}
	var before uint64
	if v := c.QueryParam("cursor"); v != "" {
		if before, err = strconv.ParseUint(v, 10, 64); err != nil || before == 0 {
			return fmt.Errorf("%w: cursor %q is not one this listing gave", errMalformed, v)
		}
	}
	if err := s.caughtUp(c, "lookups"); err != nil {
		return err
	}
	// One more than the page, to know whether another follows.
	rows, err := s.Reads.Unapplied(c.Request().Context(), c.QueryParam("provider"), before, limit+1)
	if err != nil {
		return err
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	page := struct {
		Events []unappliedView `json:"events"`
		Next   string          `json:"next,omitempty"`
	}{Events: make([]unappliedView, len(rows))}
	for i, r := range rows {
		page.Events[i] = unappliedView{Provider: r.Provider, Principal: r.Principal, EventID: r.EventID, EventType: r.EventType,
			OrderID: r.OrderID, Reason: r.Reason, RecordedAt: r.RecordedAt}
	}
	if more {
		page.Next = strconv.FormatUint(rows[len(rows)-1].Position, 10)
	}
	return c.JSON(http.StatusOK, page)
}
