package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/projections"
)

// pageSize is how many orders a page of the list shows.
const pageSize = 25

// filterForm is the orders list's filters, as the form sends them.
type filterForm struct {
	Status, Customer, From, To string
}

// First is the URL of the list's first page with the form's filters.
func (f filterForm) First() string { return "/console/orders?" + f.query("") }

// query is the form as a query string, with the cursor after.
func (f filterForm) query(after string) string {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "customer": f.Customer, "from": f.From, "to": f.To, "after": after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

// filter checks the form and makes it a filter of the read model: dates are days in UTC,
// both ends included.
func (f filterForm) filter() (projections.OrderFilter, error) {
	of := projections.OrderFilter{Status: f.Status, CustomerID: f.Customer, Limit: pageSize}
	if f.Status != "" && !validStatus(f.Status) {
		return of, fmt.Errorf("status %q is not an order status", f.Status)
	}
	for _, d := range []struct {
		v    string
		into *time.Time
		days int
	}{{f.From, &of.CreatedFrom, 0}, {f.To, &of.CreatedBefore, 1}} {
		if d.v == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, d.v)
		if err != nil {
			return of, fmt.Errorf("%q is not a date such as 2026-11-29", d.v)
		}
		*d.into = t.AddDate(0, 0, d.days)
	}
	return of, nil
}

func statuses() []string {
	var out []string
	for st := order.StatusCreated; st <= order.StatusRefunded; st++ {
		out = append(out, st.String())
	}
	return out
}

func validStatus(s string) bool {
	for _, st := range statuses() {
		if st == s {
			return true
		}
	}
	return false
}

type ordersData struct {
	Filter    filterForm
	Statuses  []string
	Problem   string
	Rows      []projections.OrderRow
	Next      string // the next page's URL, "" on the last page
	Paged     bool   // this is not the first page
	AllOrders bool   // the caller reads every principal's orders
}

// ordersPage lists orders newest first, a page at a time by the id of the last one shown
// (keyset paging: orders created meanwhile never shift a page). A client sees its own only.
func (c *Console) ordersPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	d := ordersData{Filter: filterForm{Status: q.Get("status"), Customer: q.Get("customer"), From: q.Get("from"), To: q.Get("to")},
		Statuses: statuses(), Paged: q.Get("after") != "", AllOrders: v.caller.MayReadAnyOrder()}
	f, err := d.Filter.filter()
	if err != nil {
		d.Problem = err.Error()
		c.render(w, r, http.StatusBadRequest, "orders", "Orders", v, d)
		return
	}
	f.After = q.Get("after")
	if !d.AllOrders {
		f.Principal = v.caller.Principal
	}
	if err := c.svc.CaughtUp(ctx, "orders"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	rows, next, err := c.svc.Reads.ListOrders(ctx, f)
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	d.Rows = rows
	if next != "" {
		d.Next = "/console/orders?" + d.Filter.query(next)
	}
	c.render(w, r, http.StatusOK, "orders", "Orders", v, d)
}

// numberParam reads the query parameter name as a whole number of 0 or more (a revision, an
// index); ok is false if it is absent.
func numberParam(r *http.Request, name string) (n uint64, ok bool, err error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, false, nil
	}
	n, err = strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %s must be a whole number of 0 or more", errBadInput, name)
	}
	return n, true, nil
}
