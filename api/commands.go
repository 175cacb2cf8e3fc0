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
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/idempotency"
	"github.com/acme/orders/keyed"
	"github.com/labstack/echo/v4"
)

// route is one command endpoint: how to read its command from the request.
type route struct {
	name   string // the command's (order.Command.CommandName), known before the body is read
	create bool   // POST /v1/orders: the order id is drawn when the key is claimed
	// lookup finds the order of a route that does not name it; nil means the path's :id.
	lookup func(s *Server, c echo.Context) (string, error)
	// parse reads the command from the path values and the JSON body.
	parse func(c echo.Context, body []byte) (order.Command, error)
}

// commandTimeout bounds a command that the client stopped waiting for: it runs to its end
// (see command), but not forever.
const commandTimeout = 30 * time.Second

// command serves a route: check the request, then run it once per Idempotency-Key through the
// pipeline (keyed.Pipeline), which owns the key's protocol and answers a retry before its body
// is read as a command.
func (s *Server) command(rt route) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, release, err := s.readBody(c)
		if err != nil {
			return err
		}
		defer release()
		in, err := s.intake(c, body)
		if err != nil {
			return err
		}
		// The command runs to its end even if the client goes away: a dropped connection
		// must not leave an effect without its recorded outcome.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), commandTimeout)
		defer cancel()
		if !in.keyed {
			if err := s.parse(c, rt, &in, body, release); err != nil {
				return err
			}
			stateOf(c).command = rt.name
			res, err := s.run(ctx, in.orderID, in.cmd, in.md, in.ifMatch)
			return s.write(c, s.respond(rt, in.orderID, res, err), res.Repeated)
		}
		ans, err := s.pipeline().Do(ctx, s.keyRequest(c, rt, in), func(r *idempotency.Request) (keyed.Work, error) {
			if err := s.parse(c, rt, &in, body, release); err != nil {
				return nil, err
			}
			stateOf(c).command = rt.name // a request that is no command counts as none
			r.Fingerprint = in.md.Fingerprint
			if !rt.create {
				r.OrderID = in.orderID
			}
			return s.keyed(rt, in), nil
		})
		noteCause(ctx, ans.Err) // for the log line of a 5xx answer (see answerFailures)
		if err != nil {
			return err
		}
		stateOf(c).command = rt.name // a retry replayed before its body was read as a command
		return s.write(c, ans.Outcome, ans.Replayed)
	}
}

// keyRequest is what the pipeline needs to know of a keyed command request before its body is
// read as a command. A create's order id is drawn here: the pipeline claims the key with it,
// or, taking the key over, with the id of the key's first claim.
func (s *Server) keyRequest(c echo.Context, rt route, in commandRequest) idempotency.Request {
	req := c.Request()
	var id string
	if rt.create {
		id = s.IDs.New(time.Now()).String()
	}
	return idempotency.Request{
		Principal: in.md.Principal, Key: in.md.IdempotencyKey,
		Method: req.Method, Path: req.URL.Path, Digest: in.digest,
		OrderID:  id,
		Claimant: s.Node + "/" + requestID(c),
	}
}

// keyed is the command of a keyed request, as the pipeline runs it: its answers are respond's,
// with the errors of an order its caller may not see or that If-Match cannot match told as run
// tells them.
func (s *Server) keyed(rt route, in commandRequest) keyed.OrderCommand {
	var opts []command.Option
	if in.ifMatch.tags {
		opts = append(opts, command.At(in.ifMatch.revisions...))
	}
	return keyed.OrderCommand{
		Command: in.cmd, Metadata: in.md, Options: opts, Create: rt.create,
		Render: func(orderID string, res command.Result, err error) idempotency.Outcome {
			res, err = refusal(in.cmd, orderID, in.ifMatch, res, err)
			return s.respond(rt, orderID, res, err)
		},
	}
}

// pipeline is the keyed-command pipeline of the server's keys.
func (s *Server) pipeline() *keyed.Pipeline {
	s.pipelineOnce.Do(func() {
		s.keyedPipeline = &keyed.Pipeline{Keys: s.Keys, Orders: s.Orders, Hooks: s.Hooks}
	})
	return s.keyedPipeline
}

// commandRequest is a command request that passed every check that needs no state.
type commandRequest struct {
	md      command.Metadata
	keyed   bool
	ifMatch precondition
	orderID string             // the path's, or the one its route looks up; "" for a create
	digest  idempotency.Digest // of the request's bytes
	cmd     order.Command
}

// intake checks what a command request says beside its command, from the cheapest check to
// the dearest: the body's type, the key, If-Match. The bodies being read and checked at once are
// bounded (readBody).
func (s *Server) intake(c echo.Context, body []byte) (in commandRequest, err error) {
	req := c.Request()
	if len(bytes.TrimSpace(body)) > 0 && !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return in, echo.ErrUnsupportedMediaType
	}
	key, keyed := req.Header["Idempotency-Key"]
	switch {
	case !keyed && req.Method == http.MethodPost:
		return in, idempotency.ErrKeyMissing
	case keyed && (len(key) != 1 || idempotency.ValidateKey(key[0]) != nil):
		return in, idempotency.ErrKeyInvalid
	}
	in = commandRequest{md: command.Metadata{Principal: principal(c), CorrelationID: requestID(c)}, keyed: keyed}
	if in.ifMatch, err = parseIfMatch(req.Header.Values("If-Match")); err != nil {
		return in, err
	}
	if keyed {
		in.md.IdempotencyKey = key[0]
		in.digest = idempotency.DigestOf(req.Method, req.URL.Path, body)
	}
	return in, nil
}

// parse reads the request's command from its path and body, fingerprints a keyed one only
// once its body was read as the route's command (a body that is not one is refused without
// being decoded twice), gives the body's bytes back (release), and finds the order. The path
// fingerprinted is the decoded one, as it always was, so a retry that escapes a value
// otherwise (%2B or +) is the same request. It is unambiguous: the order id is a ULID, and a
// route's one other value sits between segments that name the route.
func (s *Server) parse(c echo.Context, rt route, in *commandRequest, body []byte, release func()) (err error) {
	req := c.Request()
	if !rt.create && rt.lookup == nil {
		if in.orderID, err = orderID(c); err != nil {
			return err
		}
	}
	if in.cmd, err = rt.parse(c, body); err != nil {
		return err
	}
	if in.keyed {
		if in.md.Fingerprint, err = idempotency.Fingerprint(req.Method, req.URL.Path, body); err != nil {
			return err
		}
	}
	release()
	if rt.lookup != nil {
		if in.orderID, err = rt.lookup(s, c); err != nil {
			return err
		}
	}
	if rt.create && in.ifMatch.exists {
		return noOrderToMatch(in.cmd, in.orderID)
	}
	return nil
}

// run runs an unkeyed cmd on the order under the precondition of If-Match.
func (s *Server) run(ctx context.Context, orderID string, cmd order.Command, md command.Metadata, ifMatch precondition) (command.Result, error) {
	var opts []command.Option
	if ifMatch.tags {
		opts = append(opts, command.At(ifMatch.revisions...))
	}
	res, err := s.Orders.Handle(ctx, orderID, cmd, md, opts...)
	noteCause(ctx, err) // for the log line of a 5xx answer (see answerFailures)
	return refusal(cmd, orderID, ifMatch, res, err)
}

// refusal tells what cmd on the order came to as its caller may see it: an order of another
// principal does not exist for it, and a missing order does not match If-Match: *.
func refusal(cmd order.Command, orderID string, ifMatch precondition, res command.Result, err error) (command.Result, error) {
	var oe *order.Error
	switch {
	case errors.Is(err, command.ErrNotOwner) && ifMatch.exists:
		return command.Result{}, noOrderToMatch(cmd, orderID)
	case errors.Is(err, command.ErrNotOwner):
		// To anyone but its creator, an order does not exist.
		return command.Result{}, notYours(orderID, cmd, ifMatch)
	case ifMatch.exists && errors.As(err, &oe) && oe.Kind == order.KindNotFound && res.State.Version == 0:
		return command.Result{}, noOrderToMatch(cmd, orderID) // not a missing line: no order
	}
	return res, err
}

// respond turns a command's result into the response that is sent, stored and replayed.
func (s *Server) respond(rt route, orderID string, res command.Result, err error) idempotency.Outcome {
	if err != nil {
		return problemOutcome(err)
	}
	body, _ := OrderJSON(res.State) // a view of strings, numbers and times: no error
	out := idempotency.Outcome{
		Status: http.StatusOK,
		Headers: map[string]string{
			echo.HeaderContentType: echo.MIMEApplicationJSON,
			"ETag":                 etag(res.State.Version),
		},
		Position: res.Position.Commit,
		Body:     string(append(body, '\n')),
	}
	if rt.create {
		out.Status = http.StatusCreated
		out.Headers["Location"] = "/v1/orders/" + orderID
	}
	return out
}

// problemOutcome is the answer of a keyed write that err refused: its problem.
func problemOutcome(err error) idempotency.Outcome {
	p := problemOf(err)
	body, _ := json.Marshal(p)
	out := idempotency.Outcome{
		Status:  p.Status,
		Code:    p.Code(),
		Headers: map[string]string{echo.HeaderContentType: "application/problem+json"},
		Body:    string(body) + "\n",
	}
	if errors.Is(err, command.ErrConflict) {
		out.Headers["Retry-After"] = "1" // other processes won the order for the whole retry budget
	}
	return out
}

func (s *Server) write(c echo.Context, out idempotency.Outcome, replayed bool) error {
	if out.Code != "" {
		stateOf(c).outcome = out.Code
	}
	// The header values share one array: a slice each would be an allocation each.
	h := c.Response().Header()
	values := make([]string, 0, len(out.Headers)+1)
	set := func(name, v string) {
		values = append(values, v)
		h[textproto.CanonicalMIMEHeaderKey(name)] = values[len(values)-1 : len(values) : len(values)]
	}
	for k, v := range out.Headers {
		set(k, v)
	}
	if out.Position != 0 {
		set(logPosition, strconv.FormatUint(out.Position, 10))
	}
	if replayed {
		set("Idempotent-Replayed", "true")
	}
	return c.Blob(out.Status, out.Headers[echo.HeaderContentType], []byte(out.Body))
}

// logPosition is the header that tells the log position of a command's effect (see caughtUp).
const logPosition = "Log-Position"

// etag is the entity tag of an order at version: "v" and the version, the number its answer's
// "version" says. Tags of the form before it, a bare number, were the order's stream revision
// (its version less one), and If-Match still reads them so (revisionOf).
func etag(version int64) string { return `"v` + strconv.FormatInt(version, 10) + `"` }

// revisionOf is the order's stream revision that a strong entity tag's opaque text names: "v"
// and a version of 1 or more (etag), or a bare revision (the form before); ok is false for any
// other text, which no order's tag matches.
func revisionOf(tag string) (rev uint64, ok bool) {
	digits, version := strings.CutPrefix(tag, "v")
	n, err := strconv.ParseUint(digits, 10, 64)
	switch {
	case err != nil || strconv.FormatUint(n, 10) != digits:
		return 0, false
	case version:
		return n - 1, n >= 1
	}
	return n, true
}

// precondition is a command's If-Match (RFC 9110 §13.1.1): a list of entity tags, met by an
// order whose ETag one of them matches by strong comparison; or * for any revision; or none.
type precondition struct {
	// tags: If-Match lists entity tags; revisions are those of them that can match: strong
	// tags of this API's form. A weak tag never matches, nor does another's: a list of none
	// but those is never met.
	tags      bool
	revisions []uint64
	// exists is If-Match: *, met by an existing order whatever its revision; never by a
	// missing one (RFC 9110 §13.1.1), nor by the order a create would make.
	exists bool
}

// noOrderToMatch is the error of cmd on a missing order under If-Match: *.
func noOrderToMatch(cmd order.Command, orderID string) error {
	return fmt.Errorf("%s on order %s: %w: If-Match is * and the order does not exist", cmd.CommandName(), orderID, command.ErrPreconditionFailed)
}

// parseIfMatch reads the If-Match headers, which form one list: *, or entity tags separated by
// commas, each quoted and maybe weak (W/"…"). Anything else is malformed.
func parseIfMatch(values []string) (precondition, error) {
	v := strings.TrimSpace(strings.Join(values, ","))
	switch v {
	case "":
		return precondition{}, nil
	case "*":
		return precondition{exists: true}, nil
	}
	p := precondition{tags: true}
	malformed := fmt.Errorf("%w: If-Match must be * or a list of entity tags, such as \"v3\"", errMalformed)
	for rest := v; rest != ""; {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			break
		}
		weak := strings.HasPrefix(rest, "W/")
		rest = strings.TrimPrefix(rest, "W/")
		if !strings.HasPrefix(rest, `"`) {
			return precondition{}, malformed
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return precondition{}, malformed
		}
		tag := rest[1 : 1+end]
		rest = rest[2+end:]
		if next := strings.TrimLeft(rest, " \t"); next != "" && next[0] != ',' {
			return precondition{}, malformed
		}
		if rev, ok := revisionOf(tag); ok && !weak {
			p.revisions = append(p.revisions, rev)
		}
	}
	return p, nil
}

// isJSON reports whether contentType is JSON, which is UTF-8 (RFC 8259 §8.1): a charset
// parameter that names another refuses the body (415).
func isJSON(contentType string) bool {
	if contentType == echo.MIMEApplicationJSON {
		return true // what nearly every client sends, without parsing
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// required fails for the first missing field (present[name] false), in name order.
func required(present map[string]bool) error {
	all := true
	for _, ok := range present {
		all = all && ok
	}
	if all {
		return nil // without sorting the names
	}
	for _, name := range slices.Sorted(maps.Keys(present)) {
		if !present[name] {
			return fmt.Errorf("%w: field %q is required", errMalformed, name)
		}
	}
	return nil
}
