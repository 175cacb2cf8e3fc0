package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/acme/orders/providers"
	"github.com/oklog/ulid/v2"
)

type providerCmd struct {
	Send providerSendCmd `cmd:"" help:"Send a running service a delivery signed as a payment provider signs it, as 'stripe trigger' does: to try provider events locally."`
}

// providerSendCmd builds an event in the provider's scheme, or takes one from --body, signs
// it with the provider's first secret and posts it to the service's provider events.
type providerSendCmd struct {
	ProvidersFile string `required:"" env:"API_PAYMENT_PROVIDERS" placeholder:"FILE" help:"The payment providers file, as the service reads it."`
	Provider      string `required:"" placeholder:"NAME" help:"The provider to send as: a name in the providers file."`
	URL           string `name:"url" default:"http://127.0.0.1:8080" env:"API_URL" help:"Base URL of the running service."`
	Type          string `placeholder:"TYPE" help:"The provider's event type, required unless --body is given: payment.succeeded, payment.failed or refund.succeeded (Standard Webhooks); payment_intent.succeeded, payment_intent.payment_failed, refund.updated or charge.refunded (Stripe); any other is sent all the same."`
	PaymentID     string `name:"payment-id" placeholder:"ID" help:"The payment's id (Stripe: the payment intent, pi_…)."`
	OrderID       string `name:"order-id" placeholder:"ID" help:"The order's id, in the event's metadata."`
	RefundID      string `name:"refund-id" placeholder:"ID" help:"The refund's id (Stripe: re_…)."`
	Amount        int64  `help:"The amount, in minor units (1250 is 12.50)."`
	Currency      string `placeholder:"CODE" help:"The amount's ISO 4217 currency, e.g. EUR."`
	Reason        string `help:"A failure's message."`
	EventID       string `name:"event-id" placeholder:"ID" help:"The event's id; a new one by default (evt_… for Stripe, msg_… for Standard Webhooks)."`
	Times         int    `default:"1" placeholder:"N" help:"Send the same delivery this many times (at most 100), signed afresh each time, as a provider redelivers it."`
	Body          string `placeholder:"FILE" help:"Send this JSON body instead of building one from the flags above."`
}

// maxTimes bounds --times: it shows a redelivery, it is not a load test.
const maxTimes = 100

// maxProviderAnswer bounds what is read and printed of an answer.
const maxProviderAnswer = 64 << 10

func (c *providerSendCmd) Run(ctx context.Context, e *env) error {
	switch {
	case c.Times < 1 || c.Times > maxTimes:
		return fmt.Errorf("--times %d: 1 to %d", c.Times, maxTimes)
	case c.Type == "" && c.Body == "":
		return errors.New("give the event's --type, or a --body to send")
	}
	set, err := providers.ReadFile(c.ProvidersFile)
	if err != nil {
		return err
	}
	p, ok := set.Get(c.Provider)
	if !ok {
		return fmt.Errorf("no provider %q in %s; it has %s", c.Provider, c.ProvidersFile, strings.Join(set.Names(), ", "))
	}
	id := c.EventID
	if id == "" {
		id = newEventID(p.Scheme)
	}
	body, err := c.body(p, id, time.Now())
	if err != nil {
		return err
	}
	target := strings.TrimSuffix(c.URL, "/") + "/v1/provider-events/" + url.PathEscape(p.Name)
	what := "event " + id
	if c.Body != "" {
		what = c.Body
	}
	fmt.Fprintf(e.stderr, "sending %s as %s to %s, %d time(s)\n", what, p.Name, target, c.Times)
	refused := 0
	for i := range c.Times {
		ok, err := sendDelivery(ctx, p, id, body, target, e.stdout)
		if err != nil {
			return fmt.Errorf("delivery %d: %w", i+1, err)
		}
		if !ok {
			refused++
		}
	}
	if refused > 0 {
		return fmt.Errorf("the service refused %d of %d deliveries", refused, c.Times)
	}
	return nil
}

// newEventID is a new event id in the style of the scheme's.
func newEventID(s providers.Scheme) string {
	if s == providers.Stripe {
		return "evt_" + ulid.Make().String()
	}
	return "msg_" + ulid.Make().String()
}

// body is the delivery's body: the --body file as it is, or the event of the flags in p's
// scheme, refused if the service could not read it (send a --body to try that).
func (c *providerSendCmd) body(p providers.Provider, id string, at time.Time) ([]byte, error) {
	if c.Body != "" {
		body, err := os.ReadFile(c.Body)
		if err != nil {
			return nil, fmt.Errorf("--body: %w", err)
		}
		return body, nil
	}
	ev := providers.Event{
		ID: id, Type: c.Type, PaymentID: c.PaymentID, OrderID: c.OrderID, RefundID: c.RefundID,
		Amount: order.Money{Amount: c.Amount, Currency: order.Currency(strings.ToUpper(c.Currency))},
		Reason: c.Reason,
	}
	body, err := p.Body(ev, at)
	if err != nil {
		return nil, err
	}
	h, err := p.Sign(id, at, body)
	if err != nil {
		return nil, err
	}
	if _, err := p.Read(h, body); err != nil {
		return nil, fmt.Errorf("the service could not read this event (%w): give --payment-id, --refund-id, --amount and --currency as its type needs, or send a --body of your own", err)
	}
	return body, nil
}

// sendDelivery posts body to target, signed as p signs it now, and prints the answer's status
// and body, one line each. It reports whether the service accepted the delivery (a 2xx).
func sendDelivery(ctx context.Context, p providers.Provider, id string, body []byte, target string, out io.Writer) (bool, error) {
	h, err := p.Sign(id, time.Now(), body)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			err = uerr.Err // it repeats the method and URL
		}
		return false, fmt.Errorf("no answer from the service at %s (--url or API_URL): %w", target, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderAnswer))
	if err != nil {
		return false, fmt.Errorf("reading the answer: %w", err)
	}
	status := resp.Status
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		status += " (Idempotent-Replayed: the first answer again)"
	}
	fmt.Fprintln(out, status)
	fmt.Fprintln(out, cmp.Or(oneLine(answer), "(no body)"))
	return resp.StatusCode >= 200 && resp.StatusCode < 300, nil
}

// oneLine is an answer's body on one line: JSON compacted, other text with its line breaks
// as spaces.
func oneLine(body []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, body) == nil {
		return b.String()
	}
	return strings.Join(strings.Fields(string(body)), " ")
}
