package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/eventstore"
	"github.com/labstack/echo/v4"
)

// stateView is an order as it was at a point of its history.
type stateView struct {
	Revision uint64    `json:"revision"` // of the last event folded
	Order    orderView `json:"order"`
}

// getState folds the order's events up to ?revision=N or ?at=<RFC 3339 time>, never from a
// read model: this is what an auditor sees the order was then.
func (s *Server) getState(c echo.Context) error {
	id, err := orderID(c)
	if err != nil {
		return err
	}
	rev, at := c.QueryParam("revision"), c.QueryParam("at")
	var until uint64
	var before time.Time
	switch {
	case rev != "" && at == "":
		if until, err = strconv.ParseUint(rev, 10, 63); err != nil {
			return fmt.Errorf("%w: revision must be a revision number", errMalformed)
		}
	case at != "" && rev == "":
		if before, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return fmt.Errorf("%w: at must be an RFC 3339 time", errMalformed)
		}
	default:
		return fmt.Errorf("%w: give either revision or at", errMalformed)
	}
	var f order.Folder
	var last uint64
	folded := false
	for e, err := range s.Store.ReadStream(c.Request().Context(), command.StreamName(id), eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return fmt.Errorf("%w: %s", errOrderNotFound, id)
		}
		if err != nil {
			return err
		}
		if (at == "" && e.Revision > until) || (at != "" && e.Recorded.After(before)) {
			break
		}
		ev, err := order.Unmarshal(e.Type, e.Data)
		if err != nil {
			return fmt.Errorf("order %s@%d: %w", id, e.Revision, err)
		}
		f.Apply(ev)
		last, folded = e.Revision, true
	}
	if !folded {
		return fmt.Errorf("%w: order %s did not exist then", errNotFound, id)
	}
	if at == "" && last < until {
		return fmt.Errorf("%w: order %s has no revision %d", errNotFound, id, until)
	}
	return c.JSON(http.StatusOK, stateView{Revision: last, Order: viewOrder(f.State())})
}
