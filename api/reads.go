package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/fault"
	"github.com/acme/orders/webhooks"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/projections"
	"github.com/labstack/echo/v4"
)

// readWait bounds how long a query waits for a read model to reach the position it needs.
const readWait = 2 * time.Second

// errBehind: a read model did not reach the position a query needs in time.
var errBehind = fault.New(fault.Unavailable, "", "the read model has not caught up yet")

// caughtUp waits until projection has applied every event up to the query's minPosition, or
// without one up to the head of the log at the time of the request: a read never presents as
// current a state older than what the client could already have been told.
func (s *Server) caughtUp(c echo.Context, projection string) error {
	return s.caughtUpTo(c, projection, false)
}

// caughtUpTo is caughtUp that waits at least for the head of the log if head is set, even
// with a minPosition.
func (s *Server) caughtUpTo(c echo.Context, projection string, head bool) error {
	ctx := c.Request().Context()
	var pos eventstore.Position
	v := c.QueryParam("minPosition")
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: minPosition must be a log position such as a Log-Position header", errMalformed)
		}
		pos = eventstore.Position{Commit: n, Prepare: n}
	}
	asked := pos
	if v == "" || head {
		h, err := s.Feed.Head(ctx)
		if err != nil {
			return err
		}
		if h.Compare(pos) > 0 {
			pos = h
		}
	}
	err := s.reached(c, projection, pos)
	if v != "" && errors.Is(err, errBehind) {
		return s.issued(c, asked, err)
	}
	return err
}

// issued answers a query whose minPosition the read model did not reach within its bound:
// behind (503, retry) if the log holds that position, or 400 if it is beyond the head of the
// log even now, when no command can have been answered with it: a Log-Position is given once
// its events are durable in the store whose head this reads (on KurrentDB the node the client
// reads, the leader by default; the wait covers a follower's lag). Retrying it would never end.
func (s *Server) issued(c echo.Context, asked eventstore.Position, behind error) error {
	h, err := s.Feed.Head(c.Request().Context())
	if err != nil || h.Commit >= asked.Commit {
		return behind
	}
	c.Response().Header().Del("Retry-After")
	return fmt.Errorf("%w: minPosition %d is beyond the head of the log (%d): no command was answered with it", errMalformed, asked.Commit, h.Commit)
}

// reached waits, within readWait, until projection has applied every event up to pos and can
// be read (not while an upgrade rebuilds it: see projections.Runner.WaitFor); past the bound
// it answers 503 with Retry-After.
func (s *Server) reached(c echo.Context, projection string, pos eventstore.Position) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readWait)
	defer cancel()
	if err := s.Projections.WaitFor(ctx, projection, pos); err != nil {
		if errors.Is(err, projections.ErrBehind) {
			c.Response().Header().Set("Retry-After", "1") // the 503's; handleError keeps it
			if why := s.failing(c.Request().Context(), projection); why != "" {
				return fmt.Errorf("%w: %s is stopped: %s", errBehind, projection, why)
			}
			if pos == (eventstore.Position{}) {
				return fmt.Errorf("%w: %s cannot be read yet", errBehind, projection)
			}
			return fmt.Errorf("%w: %s has not reached position %d", errBehind, projection, pos.Commit)
		}
		return err
	}
	return nil
}

// failing is the error of projection if it is failing (an event it cannot apply, say), so
// that a read it cannot answer says why; "" otherwise.
func (s *Server) failing(ctx context.Context, projection string) string {
	st, err := s.Projections.Status(ctx)
	if err != nil {
		return ""
	}
	for _, p := range st {
		if p.Name == projection && p.State == projections.StateFailed {
			return p.Error
		}
	}
	return ""
}

// getOrder answers from the orders read model.
func (s *Server) getOrder(c echo.Context) error {
	id, err := orderID(c)
	if err != nil {
		return err
	}
	if err := s.caughtUp(c, "orders"); err != nil {
		return err
	}
	row, ok, err := s.Reads.Order(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", errOrderNotFound, id)
	}
	h := c.Response().Header()
	h.Set("ETag", etag(row.State.Version))
	h.Set("Log-Position", strconv.FormatUint(row.Position, 10))
	return c.JSON(http.StatusOK, viewOrder(row.State))
}

// listOrders answers a page of the orders read model, newest first.
func (s *Server) listOrders(c echo.Context) error {
	limit, err := pageLimit(c)
	if err != nil {
		return err
	}
	if st := c.QueryParam("status"); st != "" && !validStatus(st) {
		return fmt.Errorf("%w: status %q is not an order status", errMalformed, st)
	}
	if err := s.caughtUp(c, "orders"); err != nil {
		return err
	}
	filter := projections.OrderFilter{
		Status: c.QueryParam("status"), CustomerID: c.QueryParam("customerId"), After: c.QueryParam("cursor"), Limit: limit,
	}
	if !callerOf(c).MayReadAnyOrder() {
		filter.Principal = principal(c) // a client lists its own orders only
	}
	rows, next, err := s.Reads.ListOrders(c.Request().Context(), filter)
	if err != nil {
		return err
	}
	page := struct {
		Orders []orderView `json:"orders"`
		Next   string      `json:"next,omitempty"`
	}{Orders: make([]orderView, len(rows)), Next: next}
	for i, r := range rows {
		page.Orders[i] = viewOrder(r.State)
	}
	return c.JSON(http.StatusOK, page)
}

// pageLimit is a listing's limit query value: 1 to 500, 50 if absent.
func pageLimit(c echo.Context) (int, error) {
	v := c.QueryParam("limit")
	if v == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		return 0, fmt.Errorf("%w: limit must be 1 to 500", errMalformed)
	}
	return n, nil
}

type keyView struct {
	Key         string     `json:"key"`
	OrderID     string     `json:"orderId,omitempty"`
	EndpointID  string     `json:"endpointId,omitempty"`
	Method      string     `json:"method"`
	Path        string     `json:"path"`
	Status      *int       `json:"status,omitempty"` // absent while in flight
	ClaimedAt   time.Time  `json:"claimedAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	ExpiresAt   time.Time  `json:"expiresAt"`
	Expired     bool       `json:"expired"`
}

// validStatus reports whether s names an order status.
func validStatus(s string) bool {
	for st := order.StatusCreated; st <= order.StatusRefunded; st++ {
		if st.String() == s {
			return true
		}
	}
	return false
}

// getKey answers the caller's own idempotency key from the lookups read model.
func (s *Server) getKey(c echo.Context) error {
	key, err := pathValue(c, "key")
	if err != nil {
		return err
	}
	// Up to the log's head: an answer is given once its outcome is recorded, so the key reads
	// as completed once its answer was given (its Log-Position comes before the outcome).
	if err := s.caughtUpTo(c, "lookups", true); err != nil {
		return err
	}
	row, ok, err := s.Reads.Key(c.Request().Context(), principal(c), key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no such idempotency key", errNotFound)
	}
	v := keyView{Key: row.Key, OrderID: row.OrderID, Method: row.Method, Path: row.Path,
		ClaimedAt: row.ClaimedAt, ExpiresAt: row.ExpiresAt, Expired: !row.ExpiresAt.After(time.Now())}
	if webhooks.IsEndpointID(row.OrderID) {
		v.OrderID, v.EndpointID = "", row.OrderID // a webhook endpoint's key: its subject is the endpoint
	}
	if row.Status != 0 {
		v.Status = &row.Status
		v.CompletedAt = &row.CompletedAt
	}
	return c.JSON(http.StatusOK, v)
}

// paymentOrder finds the caller's order of the path's payment id, waiting for the lookup to
// catch up before it answers that there is none.
func paymentOrder(s *Server, c echo.Context) (string, error) {
	paymentID, err := pathValue(c, "paymentId")
	if err != nil {
		return "", err
	}
	// Any position will do for a hit, but not before the lookup can be read.
	if err := s.reached(c, "lookups", eventstore.Position{}); err != nil {
		return "", err
	}
	id, ok, err := s.callersPaymentOrder(c, paymentID)
	if err != nil || ok {
		return id, err
	}
	if err := s.caughtUp(c, "lookups"); err != nil {
		return "", err
	}
	if id, ok, err = s.callersPaymentOrder(c, paymentID); err != nil || ok {
		return id, err
	}
	return "", fmt.Errorf("%w: no order has payment %s", errNotFound, paymentID)
}

// callersPaymentOrder is the order of a payment id if the caller created it: payment ids are
// per principal, and another principal's payment with the same id is none of the caller's.
// The order's creator is checked too, so that a lookup row can never hand a caller an order
// it does not own.
func (s *Server) callersPaymentOrder(c echo.Context, paymentID string) (string, bool, error) {
	ctx := c.Request().Context()
	id, ok, err := s.Reads.PaymentOrder(ctx, principal(c), paymentID)
	if err != nil || !ok {
		return "", false, err
	}
	owner, found, err := s.Orders.Owner(ctx, id)
	if err != nil || !found || owner != principal(c) {
		return "", false, err
	}
	return id, true, nil
}

// projectionView is a projection's status as the admin API shows it.
type projectionView struct {
	projections.Status
	Checkpoint uint64          `json:"checkpoint"`
	Head       uint64          `json:"head"`
	Rebuild    *rebuildView    `json:"rebuild,omitempty"`
	Comparison *comparisonView `json:"comparison,omitempty"`
}

type rebuildView struct {
	Generation int       `json:"generation"`
	Checkpoint uint64    `json:"checkpoint"`
	Applied    uint64    `json:"applied"`
	StartedAt  time.Time `json:"startedAt"`
	Compare    bool      `json:"compare"`
	Swap       bool      `json:"swap"`
}

// comparisonView is a rebuild's comparison, with the log position both generations were at.
type comparisonView struct {
	*projections.Comparison
	At uint64 `json:"at"`
}

func (s *Server) projectionStatus(c echo.Context) error {
	st, err := s.Projections.Status(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]projectionView, len(st))
	for i, p := range st {
		out[i] = projectionView{Status: p, Checkpoint: p.Checkpoint.Commit, Head: p.Head.Commit}
		if rb := p.Rebuild; rb != nil {
			out[i].Rebuild = &rebuildView{Generation: rb.Generation, Checkpoint: rb.Checkpoint.Commit, Applied: rb.Applied, StartedAt: rb.Started,
				Compare: rb.Compare, Swap: rb.Swap}
		}
		if c := p.Comparison; c != nil {
			out[i].Comparison = &comparisonView{Comparison: c, At: c.At.Commit}
		}
		out[i].Status.Rebuild, out[i].Status.Comparison = nil, nil
	}
	return c.JSON(http.StatusOK, map[string]any{"projections": out})
}

// rebuildProjection starts a rebuild: ?compare=true compares before the swap, which then
// happens only with swap=true; dryRun=true compares and never swaps.
func (s *Server) rebuildProjection(c echo.Context) error {
	name, err := pathValue(c, "name")
	if err != nil {
		return err
	}
	opts, err := rebuildOptions(c)
	if err != nil {
		return err
	}
	if err := s.Projections.RebuildWith(name, opts); err != nil {
		switch {
		case errors.Is(err, projections.ErrUnknownProjection):
			return fmt.Errorf("%w: %v", errNotFound, err)
		case errors.Is(err, projections.ErrRebuildRunning):
			return fmt.Errorf("%w: %v", errRebuildRunning, err)
		}
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"status": "rebuilding", "compare": opts.Compare, "swap": opts.Swap})
}

// errRebuildRunning: a rebuild with other options is running.
var errRebuildRunning = fault.New(fault.Conflict, "rebuild-in-progress", "another rebuild is running")

// rebuildOptions reads the query of a rebuild request.
func rebuildOptions(c echo.Context) (projections.RebuildOptions, error) {
	flag := func(name string) (bool, error) {
		switch v := c.QueryParam(name); v {
		case "", "false":
			return false, nil
		case "true":
			return true, nil
		default:
			return false, fmt.Errorf("%w: %s must be true or false, not %q", errMalformed, name, v)
		}
	}
	compare, err := flag("compare")
	if err != nil {
		return projections.RebuildOptions{}, err
	}
	swap, err := flag("swap")
	if err != nil {
		return projections.RebuildOptions{}, err
	}
	dryRun, err := flag("dryRun")
	switch {
	case err != nil:
		return projections.RebuildOptions{}, err
	case dryRun && swap:
		return projections.RebuildOptions{}, fmt.Errorf("%w: dryRun=true never swaps: it cannot go with swap=true", errMalformed)
	case !compare && !dryRun:
		return projections.RebuildOptions{Swap: true}, nil // a plain rebuild swaps when caught up
	}
	return projections.RebuildOptions{Compare: true, Swap: swap}, nil
}
