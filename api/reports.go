package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/projections"
	"github.com/labstack/echo/v4"
)

// Bounds of a sales report: its range of days and the rows of one page.
const (
	maxSalesDays  = 366
	maxSalesRows  = 1000
	salesRowsPage = 100 // a page's rows when the query gives no limit
)

// salesView is a day's sales in a currency, as the API answers it.
type salesView struct {
	Day              string `json:"day"`
	Currency         string `json:"currency"`
	OrdersPaid       int64  `json:"ordersPaid"`
	AmountPaid       int64  `json:"amountPaid"`
	DuplicateCharges int64  `json:"duplicateCharges"`
	DuplicateCharged int64  `json:"duplicateCharged"`
	Refunded         int64  `json:"refunded"`
	Net              int64  `json:"net"`
}

// salesReport answers a page of the sales read model for a range of days.
func (s *Server) salesReport(c echo.Context) error {
	f, err := salesFilter(c)
	if err != nil {
		return err
	}
	if err := s.caughtUp(c, projections.Sales{}.Name()); err != nil {
		return err
	}
	rows, next, err := s.Reads.Sales(c.Request().Context(), f)
	if err != nil {
		return err
	}
	page := struct {
		From     string      `json:"from"`
		To       string      `json:"to"`
		Currency string      `json:"currency,omitempty"`
		Days     []salesView `json:"days"`
		Next     string      `json:"next,omitempty"`
	}{From: f.From, To: f.To, Currency: f.Currency, Days: make([]salesView, len(rows))}
	for i, r := range rows {
		page.Days[i] = salesView{Day: r.Day, Currency: r.Currency, OrdersPaid: r.OrdersPaid, AmountPaid: r.AmountPaid,
			DuplicateCharges: r.DuplicateCharges, DuplicateCharged: r.DuplicateCharged, Refunded: r.Refunded, Net: r.Net()}
	}
	if next != (projections.SalesCursor{}) {
		page.Next = next.Day + "/" + next.Currency
	}
	return c.JSON(http.StatusOK, page)
}

// salesFilter reads and checks the query of a sales report.
func salesFilter(c echo.Context) (projections.SalesFilter, error) {
	from, err := salesDay(c, "from")
	if err != nil {
		return projections.SalesFilter{}, err
	}
	to, err := salesDay(c, "to")
	if err != nil {
		return projections.SalesFilter{}, err
	}
	switch days := int(to.Sub(from).Hours()/24) + 1; {
	case days < 1:
		return projections.SalesFilter{}, fmt.Errorf("%w: to (%s) is before from (%s)", errMalformed, c.QueryParam("to"), c.QueryParam("from"))
	case days > maxSalesDays:
		return projections.SalesFilter{}, fmt.Errorf("%w: from %s to %s is %d days; a report covers at most %d", errMalformed,
			c.QueryParam("from"), c.QueryParam("to"), days, maxSalesDays)
	}
	f := projections.SalesFilter{From: from.Format(projections.SalesDay), To: to.Format(projections.SalesDay), Limit: salesRowsPage}
	if cur := c.QueryParam("currency"); cur != "" {
		if !order.Currency(cur).Valid() {
			return projections.SalesFilter{}, fmt.Errorf("%w: currency %q is not an ISO 4217 code such as EUR", errMalformed, cur)
		}
		f.Currency = cur
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxSalesRows {
			return projections.SalesFilter{}, fmt.Errorf("%w: limit must be 1 to %d", errMalformed, maxSalesRows)
		}
		f.Limit = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		day, cur, ok := strings.Cut(v, "/")
		if _, err := time.Parse(projections.SalesDay, day); err != nil || !ok || !order.Currency(cur).Valid() {
			return projections.SalesFilter{}, fmt.Errorf("%w: cursor must be the next of a previous page", errMalformed)
		}
		f.After = projections.SalesCursor{Day: day, Currency: cur}
	}
	return f, nil
}

// salesDay reads the required day of query parameter name.
func salesDay(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, fmt.Errorf("%w: %s is required: a day such as 2026-03-01 (UTC)", errMalformed, name)
	}
	d, err := time.Parse(projections.SalesDay, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not a day such as 2026-03-01", errMalformed, name, v)
	}
	return d, nil
}
