package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/acme/orders/command"
	"github.com/acme/orders/domain/order"
	"github.com/labstack/echo/v4"
)

// StateView is an order as it was at a point of its history, as GET /v1/orders/{id}/state
// answers it. It is exported so that the command line prints the very same shape.
type StateView struct {
	Revision uint64    `json:"revision"` // of the last event folded
	Order    orderView `json:"order"`
}

// ViewState is the view of s, folded up to the event at revision.
func ViewState(revision uint64, s order.State) StateView {
	return StateView{Revision: revision, Order: viewOrder(s)}
}

// getState folds the order's events up to ?revision=N or ?at=<RFC 3339 time>, never from a
// read model: this is what an auditor sees the order was then.
func (s *Server) getState(c echo.Context) error {
	id, err := orderID(c)
	if err != nil {
		return err
	}
	var p command.Point
	switch rev, at := c.QueryParam("revision"), c.QueryParam("at"); {
	case rev != "" && at == "":
		n, err := strconv.ParseUint(rev, 10, 63)
		if err != nil {
			return fmt.Errorf("%w: revision must be a revision number", errMalformed)
		}
		p.Revision = &n
	case at != "" && rev == "":
		if p.At, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return fmt.Errorf("%w: at must be an RFC 3339 time", errMalformed)
		}
	default:
		return fmt.Errorf("%w: give either revision or at", errMalformed)
	}
	state, last, ok, err := s.Orders.LoadAt(c.Request().Context(), id, p)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%w: order %s did not exist then", errNotFound, id)
	case p.Revision != nil && last < *p.Revision:
		return fmt.Errorf("%w: order %s has no revision %d", errNotFound, id, *p.Revision)
	}
	return c.JSON(http.StatusOK, ViewState(last, state))
}
