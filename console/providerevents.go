package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/acme/orders/projections"
	"github.com/oklog/ulid/v2"
)

// unappliedPage is how many of the providers' events not applied a page lists.
const unappliedPage = 50

// unappliedRow is a line of the list: the read model's row, and whether its order id is one
// the order page takes. A provider log's order id is what the provider's event named, which
// may be anything: only an order id is made a link.
type unappliedRow struct {
	projections.UnappliedRow
	OrderLink bool
}

type unappliedData struct {
	Provider string
	Rows     []unappliedRow
	Newest   string // the first page's URL, "" on it
	Older    string // the next page's URL, "" on the last page
}

// url is the list's URL with the provider filter, from before a log position (0: the newest).
func (d unappliedData) url(before uint64) string {
	q := url.Values{}
	if d.Provider != "" {
		q.Set("provider", d.Provider)
	}
	if before != 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	if len(q) == 0 {
		return "/console/provider-events"
	}
	return "/console/provider-events?" + q.Encode()
}

// providerEventsPage lists the payment providers' events that were not applied, newest first,
// from the lookups read model as GET /v1/provider-events reads them, to the same callers
// (auditors and admins): a page at a time by the log position of the last one shown, so that
// events recorded meanwhile never shift a page.
func (c *Console) providerEventsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	if err := v.caller.Need(v.caller.MayAudit(), "read the providers' events not applied"); err != nil {
		c.fail(w, r, v, err)
		return
	}
	d := unappliedData{Provider: strings.TrimSpace(r.URL.Query().Get("provider"))}
	before, paged, err := numberParam(r, "before")
	if err == nil && paged && before == 0 {
		err = fmt.Errorf("%w: before must be a log position of 1 or more", errBadInput)
	}
	if err == nil {
		err = c.svc.CaughtUp(ctx, "lookups")
	}
	var rows []projections.UnappliedRow
	if err == nil {
		// One more than a page tells whether an older page exists.
		rows, err = c.svc.Reads.Unapplied(ctx, d.Provider, before, unappliedPage+1)
	}
	if err != nil {
		c.fail(w, r, v, err)
		return
	}
	if len(rows) > unappliedPage {
		rows = rows[:unappliedPage]
		d.Older = d.url(rows[len(rows)-1].Position)
	}
	if paged {
		d.Newest = d.url(0)
	}
	for _, row := range rows {
		_, err := ulid.ParseStrict(row.OrderID)
		d.Rows = append(d.Rows, unappliedRow{UnappliedRow: row, OrderLink: err == nil})
	}
	c.render(w, r, http.StatusOK, "provider-events", "Provider events", v, d)
}
