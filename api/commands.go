package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/idempotency"
	"github.com/labstack/echo/v4"
)

// route is one command endpoint: how to read its command from the request.
type route struct {
	name   string // the command's (order.Command.CommandName), known before the body is read
	create bool   // POST /v1/orders: the order id is drawn when the key is claimed
	// lookup finds the order of a route that does not name it; nil means the path's :id.
	lookup func(s *Server, c echo.Context) (string, error)
	// parse reads the command from the path values and the JSON body; it returns a builder
	// that completes it with the order id.
	parse func(c echo.Context, body []byte) (func(orderID string) order.Command, error)
}

// commandTimeout bounds a command that the client stopped waiting for: it runs to its end
// (see command), but not forever.
const commandTimeout = 30 * time.Second

// releaseTimeout bounds the release of a key whose outcome could not be recorded.
const releaseTimeout = 5 * time.Second

// command serves a route: check the request, then run it once per Idempotency-Key.
func (s *Server) command(rt route) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		in, replay, err := s.intake(c, rt)
		switch {
		case err != nil:
			return err
		case replay != nil:
			return s.write(c, *replay, true)
		}
		md, keyed, build, ifMatch, id := in.md, in.keyed, in.build, in.ifMatch, in.orderID
		if rt.lookup != nil {
			if id, err = rt.lookup(s, c); err != nil {
				return err
			}
		}
		c.Set(commandKey, rt.name)
		// The command runs to its end even if the client goes away: a dropped connection
		// must not leave an effect without its recorded outcome.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), commandTimeout)
		defer cancel()
		if !keyed {
			res, err := s.run(ctx, id, build(id), md, command.Options{}, ifMatch)
			return s.write(c, s.respond(rt, id, res, err), res.Repeated)
		}
		keyReq := idempotency.Request{
			Principal: md.Principal, Key: md.IdempotencyKey,
			Method: req.Method, Path: req.URL.Path, Fingerprint: md.Fingerprint,
			OrderID:    id,
			NewOrderID: func() string { return s.IDs.New(time.Now()).String() },
			Claimant:   s.Node + "/" + requestID(c),
			FindInOrderStream: func(ctx context.Context, orderID string) (*idempotency.Outcome, error) {
				rep, err := s.Orders.Find(ctx, orderID, build(orderID), md)
				if err != nil || rep == nil {
					return nil, err
				}
				out := s.respond(rt, orderID, rep.Result, rep.Err)
				return &out, nil
			},
			// A new key's claim is written with the command's events, in one append.
			Defer: true,
		}
		var running *idempotency.Claim
		defer func() {
			if running != nil {
				// A panic between the claim and its outcome: give the key up so that a retry
				// runs at once; the order's stream tells it whether the command took effect.
				s.Keys.Release(context.WithoutCancel(ctx), running, "panic")
			}
		}()
		for {
			claim, replay, err := s.Keys.Begin(ctx, keyReq)
			switch {
			case errors.Is(err, idempotency.ErrInFlight):
				writeProblem(c, problemOf(err), http.Header{"Retry-After": {"1"}})
				return nil
			case err != nil:
				return err
			case replay != nil:
				return s.write(c, *replay, true)
			}
			running = claim
			if s.Hooks.AfterClaim != nil {
				s.Hooks.AfterClaim(md.IdempotencyKey)
			}
			// A create's order id was drawn with the claim: its stream is new unless the claim
			// took over another request's.
			isNew := rt.create && !claim.Takeover
			res, err := s.run(ctx, claim.OrderID, build(claim.OrderID), md, command.Options{New: isNew, Along: claim}, ifMatch)
			running = nil
			if claim.Refused(err) {
				// The key was not new after all, and nothing was written: see what it holds.
				s.Keys.Release(ctx, claim, "")
				keyReq.Defer = false
				continue
			}
			if s.Hooks.AfterAppend != nil && len(res.Events) > 0 {
				s.Hooks.AfterAppend(md.IdempotencyKey)
			}
			out := s.respond(rt, claim.OrderID, res, err)
			reqID := requestID(c) // for the log; c is not ours once the handler returns
			switch {
			case !keep(out, err):
				if err := s.Keys.Release(ctx, claim, http.StatusText(out.Status)); err != nil {
					s.Log.Warn("release key", "request_id", reqID, "key", idempotency.KeyHash(md.Principal, md.IdempotencyKey), "error", err)
				}
			case err == nil && len(res.Events) > 0 && res.Written():
				// The answer is in the order's stream with the key's events, which this run
				// wrote: if the outcome is never recorded (a crash, or a takeover after this
				// run's lease), the next retry rebuilds this very answer from there
				// (FindInOrderStream). So answer now and record it after, saving the client a
				// wait for the store; its duplicates here get this answer too (Keys.Answered),
				// rather than wait for the record.
				s.Keys.Answered(claim, out)
				s.completing.Add(1)
				go func() {
					defer s.completing.Done()
					ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
					defer cancel()
					if s.Hooks.AfterAnswer != nil {
						s.Hooks.AfterAnswer(md.IdempotencyKey)
					}
					s.complete(ctx, reqID, claim, md, out, res)
				}()
			default:
				// Nothing in the order's stream would tell this answer word for word (a refusal
				// rebuilt from a recorded charge is worded as a replay), or the events there
				// may be another run's (a store that does not say): record it before giving it.
				// If another run of the key recorded its outcome first, that one stands: give
				// it instead. A claim left to be written with the outcome was never checked
				// against the store: if that append fails, refused because the key was not new
				// after all or for any other reason, this answer stands on nothing: see what the
				// key holds. An answer that could not be recorded is not given.
				_, pending := claim.Pending()
				err := s.complete(ctx, reqID, claim, md, out, res)
				switch {
				case pending && err != nil:
					keyReq.Defer = false
					continue
				case errors.Is(err, idempotency.ErrTakenOver):
					// Another request runs the key now: its outcome is the one to get.
					writeProblem(c, problemOf(err), http.Header{"Retry-After": {"1"}})
					return nil
				case err != nil:
					// Not recorded, so not given: let the key go, so that a retry runs the
					// command at once rather than after the lease. If the outcome did land,
					// the release is refused and the retry gets it.
					ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
					defer cancel()
					s.Keys.Release(ctx, claim, "outcome not recorded")
					return err
				case claim.Prior != nil:
					return s.write(c, *claim.Prior, true)
				}
			}
			return s.write(c, out, res.Repeated)
		}
	}
}

// commandRequest is a command request that passed every check that needs no state.
type commandRequest struct {
	md      command.Metadata
	keyed   bool
	ifMatch precondition
	orderID string // the path's; "" for a create or a route that looks its order up
	build   func(orderID string) order.Command
}

// intake checks a command request, from the cheapest check to the dearest, and fingerprints
// a keyed one only once its body was read as the route's command: a body that is not one is
// refused without being decoded twice, and the bodies being read and checked at once are
// bounded (readBody). A retry of a key completed here is answered from memory (replay) as
// soon as its bytes are known to be those of its first request, before they are read again.
func (s *Server) intake(c echo.Context, rt route) (in commandRequest, replay *idempotency.Outcome, err error) {
	req := c.Request()
	body, release, err := s.readBody(c)
	if err != nil {
		return in, nil, err
	}
	defer release()
	if len(bytes.TrimSpace(body)) > 0 && !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return in, nil, echo.ErrUnsupportedMediaType
	}
	key, keyed := req.Header["Idempotency-Key"]
	switch {
	case !keyed && req.Method == http.MethodPost:
		return in, nil, idempotency.ErrKeyMissing
	case keyed && (len(key) != 1 || idempotency.ValidateKey(key[0]) != nil):
		return in, nil, idempotency.ErrKeyInvalid
	}
	in = commandRequest{md: command.Metadata{Principal: principal(c), CorrelationID: requestID(c)}, keyed: keyed}
	if in.ifMatch, err = parseIfMatch(req.Header.Get("If-Match")); err != nil {
		return in, nil, err
	}
	// The path fingerprinted is the decoded one, as it always was, so a retry that escapes a
	// value otherwise (%2B or +) is the same request. It is unambiguous: the order id is a
	// ULID, and a route's one other value sits between segments that name the route.
	known := false
	if keyed {
		in.md.IdempotencyKey = key[0]
		if in.md.Fingerprint, known = s.Fingerprints.Known(req.Method, req.URL.Path, body); known {
			if replay, ok, err := s.recall(c, rt, in.md); ok {
				return in, replay, err
			}
		}
	}
	if !rt.create && rt.lookup == nil {
		if in.orderID, err = orderID(c); err != nil {
			return in, nil, err
		}
	}
	if in.build, err = rt.parse(c, body); err != nil || !keyed || known {
		return in, nil, err
	}
	if in.md.Fingerprint, err = s.Fingerprints.Of(req.Method, req.URL.Path, body); err != nil {
		return in, nil, err
	}
	replay, _, err = s.recall(c, rt, in.md)
	return in, replay, err
}

// recall answers a retry of a key this process remembers completed: the outcome to replay,
// or ErrKeyReused; ok is false if the key is not remembered.
func (s *Server) recall(c echo.Context, rt route, md command.Metadata) (*idempotency.Outcome, bool, error) {
	replay, ok, err := s.Keys.Recall(c.Request().Context(), md.Principal, md.IdempotencyKey, md.Fingerprint)
	if ok {
		c.Set(commandKey, rt.name)
	}
	return replay, ok, err
}

// complete records the outcome of a claimed command.
func (s *Server) complete(ctx context.Context, requestID string, claim *idempotency.Claim, md command.Metadata, out idempotency.Outcome, res command.Result) error {
	err := s.Keys.Complete(ctx, claim, out)
	switch {
	case claim.Refused(err):
		// Recorded nothing, and wrote nothing else: the caller starts again.
	case errors.Is(err, idempotency.ErrTakenOver):
		// This run outlived its lease: the taker's outcome stands.
		s.Log.Info("record outcome", "request_id", requestID, "key", idempotency.KeyHash(md.Principal, md.IdempotencyKey), "error", err)
	case err != nil:
		// The effect, if any, is in the order's stream with its key: the next retry completes
		// the record from there.
		s.Log.Warn("record outcome", "request_id", requestID, "key", idempotency.KeyHash(md.Principal, md.IdempotencyKey), "error", err)
	case claim.Kept:
		s.Orders.Settle(res) // no other run of the key can have appended
	}
	return err
}

// Drain waits until the outcomes of commands answered before their outcome was recorded are
// recorded, or ctx ends. Call it once the HTTP server has stopped, before the store closes.
func (s *Server) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.completing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("outcomes still being recorded: %w", ctx.Err())
	}
}

// keep reports whether an outcome is stored for replay: every answer below 500 that does not
// depend on a passing condition of the server.
func keep(out idempotency.Outcome, err error) bool {
	return out.Status < 500 && !errors.Is(err, command.ErrConflict)
}

// run runs cmd on the order under the precondition of If-Match.
func (s *Server) run(ctx context.Context, orderID string, cmd order.Command, md command.Metadata, opts command.Options, ifMatch precondition) (command.Result, error) {
	opts.At = ifMatch.revision
	if _, create := cmd.(order.CreateOrder); create && ifMatch.exists {
		return command.Result{}, noOrderToMatch(cmd, orderID)
	}
	res, err := s.Orders.HandleWith(ctx, orderID, cmd, md, opts)
	noteCause(ctx, err) // for the log line of a 5xx answer (see answerFailures)
	var oe *order.Error
	switch {
	case errors.Is(err, command.ErrNotOwner) && ifMatch.exists:
		return command.Result{}, noOrderToMatch(cmd, orderID)
	case errors.Is(err, command.ErrNotOwner):
		// To anyone but its creator, an order does not exist.
		return command.Result{}, notYours(orderID, cmd, opts.At)
	case ifMatch.exists && errors.As(err, &oe) && oe.Kind == order.KindNotFound && res.State.Version == 0:
		return command.Result{}, noOrderToMatch(cmd, orderID) // not a missing line: no order
	}
	return res, err
}

// respond turns a command's result into the response that is sent, stored and replayed.
func (s *Server) respond(rt route, orderID string, res command.Result, err error) idempotency.Outcome {
	if err != nil {
		p := problemOf(err)
		body, _ := json.Marshal(p)
		out := idempotency.Outcome{
			Status:  p.Status,
			Headers: map[string]string{echo.HeaderContentType: "application/problem+json"},
			Body:    string(body) + "\n",
		}
		if errors.Is(err, command.ErrConflict) {
			out.Headers["Retry-After"] = "1" // other processes won the order for the whole retry budget
		}
		return out
	}
	body, _ := json.Marshal(viewOrder(res.State))
	out := idempotency.Outcome{
		Status: http.StatusOK,
		Headers: map[string]string{
			echo.HeaderContentType: echo.MIMEApplicationJSON,
			"ETag":                 etag(res.Revision),
			"Log-Position":         strconv.FormatUint(res.Position.Commit, 10),
		},
		Body: string(body) + "\n",
	}
	if rt.create {
		out.Status = http.StatusCreated
		out.Headers["Location"] = "/v1/orders/" + orderID
	}
	return out
}

func (s *Server) write(c echo.Context, out idempotency.Outcome, replayed bool) error {
	if out.Status >= 400 {
		var p Problem
		if json.Unmarshal([]byte(out.Body), &p) == nil {
			c.Set(outcomeKey, strings.TrimPrefix(p.Type, "/problems/"))
		}
	}
	h := c.Response().Header()
	for k, v := range out.Headers {
		h.Set(k, v)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	return c.Blob(out.Status, out.Headers[echo.HeaderContentType], []byte(out.Body))
}

func etag(revision uint64) string { return `"` + strconv.FormatUint(revision, 10) + `"` }

// precondition is a command's If-Match: the order's revision, or any revision (*), or none.
type precondition struct {
	revision *uint64
	// exists is If-Match: *, met by an existing order whatever its revision; never by a
	// missing one (RFC 9110 §13.1.1), nor by the order a create would make.
	exists bool
}

// noOrderToMatch is the error of cmd on a missing order under If-Match: *.
func noOrderToMatch(cmd order.Command, orderID string) error {
	return fmt.Errorf("%s on order %s: %w: If-Match is * and the order does not exist", cmd.CommandName(), orderID, command.ErrPreconditionFailed)
}

// parseIfMatch reads If-Match: *, a quoted revision, or nothing.
func parseIfMatch(v string) (precondition, error) {
	switch v = strings.TrimSpace(v); v {
	case "":
		return precondition{}, nil
	case "*":
		return precondition{exists: true}, nil
	}
	rev, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil {
		return precondition{}, fmt.Errorf("%w: If-Match must be * or an ETag of this API, such as \"3\"", errMalformed)
	}
	return precondition{revision: &rev}, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// required fails for the first missing field (present[name] false), in name order.
func required(present map[string]bool) error {
	for _, name := range slices.Sorted(maps.Keys(present)) {
		if !present[name] {
			return fmt.Errorf("%w: field %q is required", errMalformed, name)
		}
	}
	return nil
}
