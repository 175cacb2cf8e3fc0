package console

import (
	"context"
	"net/http"
	"time"

	"github.com/acme/orders/projections"
	"github.com/acme/orders/webhooks"
)

type keyData struct {
	Key, Principal string
	AnyPrincipal   bool // the caller may read other principals' keys (auditors, admins)
	Row            *projections.KeyRow
	Expired        bool
	Missing        bool
	Endpoint       bool // the key registered a webhook endpoint or rotated its secret (Row.OrderID)
}

// keyPage shows what an Idempotency-Key holds, from the lookups read model as the API's
// GET /v1/idempotency-keys/{key} reads it. A client reads its own keys; an auditor or admin
// reads any principal's.
func (c *Console) keyPage(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	q := r.URL.Query()
	d := keyData{Key: q.Get("key"), Principal: q.Get("principal"), AnyPrincipal: v.caller.MayReadAnyOrder()}
	if d.Principal == "" {
		d.Principal = v.caller.Principal
	}
	may := v.caller.MayCommand() // its own keys
	if d.Principal != v.caller.Principal || !may {
		may = v.caller.MayAudit() // any principal's
	}
	if err := v.caller.Need(may, "read the keys of "+d.Principal); err != nil {
		c.fail(w, r, v, err)
		return
	}
	if d.Key != "" {
		if err := c.readKey(ctx, &d); err != nil {
			c.fail(w, r, v, err)
			return
		}
	}
	status := http.StatusOK
	if d.Missing {
		status = http.StatusNotFound
	}
	c.render(w, r, status, "key", "Idempotency key", v, d)
}

// readKey waits, as the API does, for the lookups to reach the log's head, then reads the key.
func (c *Console) readKey(ctx context.Context, d *keyData) error {
	if err := c.svc.CaughtUp(ctx, "lookups"); err != nil {
		return err
	}
	row, ok, err := c.svc.Reads.Key(ctx, d.Principal, d.Key)
	if err != nil {
		return err
	}
	if !ok {
		d.Missing = true
		return nil
	}
	d.Row, d.Expired, d.Endpoint = &row, !row.ExpiresAt.After(time.Now()), webhooks.IsEndpointID(row.OrderID)
	return nil
}
