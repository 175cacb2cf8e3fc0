package order

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what a command may ask for. They are chosen so that the largest possible order,
// MaxLines lines of MaxQuantity units at MaxUnitPrice, totals MaxAmount = 10^18, which fits in
// int64 (about 9.2×10^18): a total can never overflow. Totals are still computed with checked
// arithmetic, so a change to these numbers cannot silently wrap.
const (
	MaxQuantity  = 10_000
	MaxLines     = 100
	MaxUnitPrice = 1_000_000_000_000 // minor units; high enough for currencies with tiny units
	MaxAmount    = MaxLines * MaxQuantity * MaxUnitPrice

	MaxIDLen   = 128 // bytes, for ids, SKUs, tracking numbers, carriers and client references
	MaxTextLen = 500 // bytes, for free-text reasons
	MaxNameLen = 200 // bytes, for product names
)

// Sales channels. A channel is a lower-case token of at most 32 bytes (letters, digits and
// hyphens, starting with a letter), chosen by the client: "web", "mobile", "store", "phone",
// "marketplace-x"… Stored in events: never change these strings.
const (
	ChannelDefault    = "api"     // an order created without a channel
	ChannelUnrecorded = "unknown" // an order created before orders recorded one (order.created.v1)
)

// Command is a request to change an order. The set is closed: only this package's command
// types implement it, and Decide accepts them as values, not pointers.
type Command interface {
	// CommandName is the command's stable name, such as "confirm-payment". It appears in
	// errors and is meant for event metadata.
	CommandName() string

	// validate checks what can be checked without the order: formats, ranges, required
	// fields. It returns KindInvalid errors only.
	validate() *Error
}

// CreateOrder opens a new order. The caller generates OrderID; Decide never makes ids.
type CreateOrder struct {
	OrderID    string
	CustomerID string
	Currency   Currency // every amount on the order must be in this currency
	// Lines are added in order, by the rules of AddLine: a SKU listed twice at one price
	// merges into one line. Optional.
	Lines []AddLine
	// ClientRef is the client's own reference for the order (a purchase order number, say),
	// kept for lookups. Optional; may contain spaces.
	ClientRef string
	// Channel is where the order was taken (see ChannelDefault). Optional: "" records
	// ChannelDefault.
	Channel string
}

// AddLine adds Quantity units of SKU at UnitPrice. If the order already has a line for SKU
// at the same unit price, the quantity is added to it; at another price the command is
// rejected, because silently repricing a line (or keeping two prices for one SKU) would make
// the total disagree with what the client thinks it ordered.
type AddLine struct {
	SKU       string
	Name      string // the product's name, optional; a line added again keeps its first name
	Quantity  int64  // 1..MaxQuantity
	UnitPrice Money  // 1..MaxUnitPrice minor units, in the order's currency
}

// ChangeLineQuantity sets the quantity of the line for SKU. Setting the quantity it already
// has is a no-op; use RemoveLine to remove a line.
type ChangeLineQuantity struct {
	SKU      string
	Quantity int64 // 1..MaxQuantity
}

// RemoveLine removes the line for SKU.
type RemoveLine struct {
	SKU string
}

// StartPayment starts paying the order through the provider's payment PaymentID. Amount must
// equal the order total: the client states what it believes it pays, so a total that changed
// underneath it is caught here instead of charging a surprise amount.
type StartPayment struct {
	PaymentID string
	Amount    Money
}

// ConfirmPayment is the payment provider's callback: payment PaymentID captured Amount. See
// the package documentation for what happens when the order cannot accept it.
type ConfirmPayment struct {
	PaymentID string
	Amount    Money
}

// FailPayment is the provider's report that payment PaymentID failed; the order goes back to
// created. PaymentID must be the payment in progress, so that a late failure report for an
// earlier attempt cannot abort the current one.
type FailPayment struct {
	PaymentID string
	Reason    string // required, for the audit trail
}

// Cancel cancels an order that is not paid. Cancelling while a payment is in progress is
// allowed; if the provider confirms that payment later, the charge is recorded for refund.
type Cancel struct {
	Reason string // required, for the audit trail
}

// Ship records that a paid order left with Carrier under TrackingNumber.
type Ship struct {
	Carrier        string
	TrackingNumber string
}

// RequestRefund asks to refund Amount of a paid or shipped order, at most what was paid and not
// yet refunded. The caller generates RefundID (or takes it from the provider).
type RequestRefund struct {
	RefundID string
	Amount   Money
}

// CompleteRefund is the provider's report that refund RefundID was paid out. Amount, if set,
// is what it paid out: a refund the order knows must be for that amount, and a paid order
// that requested none takes it as a refund made at the provider, requested and completed at
// once.
type CompleteRefund struct {
	RefundID string
	Amount   Money
}

// ProviderEvent is a payment provider's event EventID of type EventType, as Report, one of
// ConfirmPayment, FailPayment and CompleteRefund, on the order. What the order cannot take is
// not refused but recorded (ProviderEventUnapplied, or DuplicateChargeRecorded for money
// captured), with the error that says why: the provider has reported a fact, and is answered
// so that it stops. Only a refund reported before the payment it refunds succeeded is refused
// (KindTooEarly), for the provider to report again once the order has caught up.
type ProviderEvent struct {
	Provider  string
	EventID   string
	EventType string
	Report    Command
}

func (CreateOrder) CommandName() string        { return "create-order" }
func (AddLine) CommandName() string            { return "add-line" }
func (ChangeLineQuantity) CommandName() string { return "change-line-quantity" }
func (RemoveLine) CommandName() string         { return "remove-line" }
func (StartPayment) CommandName() string       { return "start-payment" }
func (ConfirmPayment) CommandName() string     { return "confirm-payment" }
func (FailPayment) CommandName() string        { return "fail-payment" }
func (Cancel) CommandName() string             { return "cancel" }
func (Ship) CommandName() string               { return "ship" }
func (RequestRefund) CommandName() string      { return "request-refund" }
func (CompleteRefund) CommandName() string     { return "complete-refund" }
func (ProviderEvent) CommandName() string      { return "provider-event" }

func (c CreateOrder) validate() *Error {
	if err := firstError(
		checkID("order id", c.OrderID),
		checkID("customer id", c.CustomerID),
		checkCurrency("currency", c.Currency),
	); err != nil {
		return err
	}
	if c.ClientRef != "" {
		if err := checkText("client reference", c.ClientRef, MaxIDLen); err != nil {
			return err
		}
	}
	if c.Channel != "" && !validChannel(c.Channel) {
		return errorf(KindInvalid, "channel %q must be 1 to 32 lower-case letters, digits and hyphens, starting with a letter", c.Channel)
	}
	if len(c.Lines) > MaxLines {
		return errorf(KindInvalid, "%d lines, more than the %d an order can have", len(c.Lines), MaxLines)
	}
	for i, l := range c.Lines {
		if err := l.validate(); err != nil {
			err.Msg = fmt.Sprintf("lines[%d]: %s", i, err.Msg)
			return err
		}
	}
	return nil
}

func (c AddLine) validate() *Error {
	var name *Error
	if c.Name != "" {
		name = checkText("name", c.Name, MaxNameLen)
	}
	return firstError(
		checkID("sku", c.SKU),
		name,
		checkQuantity(c.Quantity),
		checkMoney("unit price", c.UnitPrice, MaxUnitPrice),
	)
}

func (c ChangeLineQuantity) validate() *Error {
	return firstError(checkID("sku", c.SKU), checkQuantity(c.Quantity))
}

func (c RemoveLine) validate() *Error { return checkID("sku", c.SKU) }

func (c StartPayment) validate() *Error {
	return firstError(checkID("payment id", c.PaymentID), checkMoney("amount", c.Amount, MaxAmount))
}

func (c ConfirmPayment) validate() *Error {
	return firstError(checkID("payment id", c.PaymentID), checkMoney("amount", c.Amount, MaxAmount))
}

func (c FailPayment) validate() *Error {
	return firstError(checkID("payment id", c.PaymentID), checkText("reason", c.Reason, MaxTextLen))
}

func (c Cancel) validate() *Error { return checkText("reason", c.Reason, MaxTextLen) }

func (c Ship) validate() *Error {
	return firstError(checkText("carrier", c.Carrier, MaxIDLen), checkID("tracking number", c.TrackingNumber))
}

func (c RequestRefund) validate() *Error {
	return firstError(checkID("refund id", c.RefundID), checkMoney("amount", c.Amount, MaxAmount))
}

func (c CompleteRefund) validate() *Error {
	if c.Amount == (Money{}) {
		return checkID("refund id", c.RefundID)
	}
	return firstError(checkID("refund id", c.RefundID), checkMoney("amount", c.Amount, MaxAmount))
}

// validate checks the event's own fields; Report is checked when it is decided, so that a
// report the order cannot take is recorded rather than refused.
func (c ProviderEvent) validate() *Error {
	switch c.Report.(type) {
	case ConfirmPayment, FailPayment, CompleteRefund:
	default:
		return errorf(KindInvalid, "a provider event reports a payment confirmed or failed or a refund completed, not %T", c.Report)
	}
	return firstError(checkID("provider", c.Provider), checkID("event id", c.EventID), checkID("event type", c.EventType))
}

func firstError(errs ...*Error) *Error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkID accepts 1..MaxIDLen bytes of printable UTF-8 without spaces: ids are compared byte
// for byte, so "A1 " and "A1" must not both be possible.
func checkID(field, v string) *Error {
	if v == "" {
		return errorf(KindInvalid, "%s is required", field)
	}
	if len(v) > MaxIDLen {
		return errorf(KindInvalid, "%s is longer than %d bytes", field, MaxIDLen)
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) >= 0 {
		return errorf(KindInvalid, "%s %q must be printable and without spaces", field, v)
	}
	return nil
}

// checkText accepts 1..max bytes of printable UTF-8 on one line, spaces allowed inside.
func checkText(field, v string, max int) *Error {
	if strings.TrimSpace(v) == "" {
		return errorf(KindInvalid, "%s is required", field)
	}
	if len(v) > max {
		return errorf(KindInvalid, "%s is longer than %d bytes", field, max)
	}
	if !IsText(v) {
		return errorf(KindInvalid, "%s %q must be printable text on one line, without leading or trailing spaces", field, v)
	}
	return nil
}

// IsText reports whether v is text as every free-text field takes it (an order's client
// reference and line names, a webhook endpoint's description): valid UTF-8 of printable
// characters (no control, format or bidi characters, line or paragraph separators,
// noncharacters) on one line, spaces inside but not around it.
func IsText(v string) bool {
	return utf8.ValidString(v) && strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 &&
		strings.TrimSpace(v) == v
}

func validChannel(c string) bool {
	if len(c) > 32 || c == "" || c[0] < 'a' || c[0] > 'z' {
		return false
	}
	return strings.IndexFunc(c, func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' }) < 0
}

func checkCurrency(field string, c Currency) *Error {
	if !c.Valid() {
		return errorf(KindInvalid, "%s %q is not an ISO 4217 code (three upper-case letters)", field, c)
	}
	return nil
}

func checkMoney(field string, m Money, max int64) *Error {
	if err := checkCurrency(field+" currency", m.Currency); err != nil {
		return err
	}
	if m.Amount < 1 || m.Amount > max {
		return errorf(KindInvalid, "%s must be 1 to %d minor units, not %d", field, max, m.Amount)
	}
	return nil
}

func checkQuantity(q int64) *Error {
	if q < 1 || q > MaxQuantity {
		return errorf(KindInvalid, "quantity must be 1 to %d, not %d", MaxQuantity, q)
	}
	return nil
}

// InCurrency returns c with every amount that names no currency put in cur: a client of an
// existing order gives amounts in the order's currency without repeating it.
func InCurrency(c Command, cur Currency) Command {
	set := func(m Money) Money {
		if m.Currency == "" {
			m.Currency = cur
		}
		return m
	}
	switch c := c.(type) {
	case AddLine:
		c.UnitPrice = set(c.UnitPrice)
		return c
	case StartPayment:
		c.Amount = set(c.Amount)
		return c
	case ConfirmPayment:
		c.Amount = set(c.Amount)
		return c
	case RequestRefund:
		c.Amount = set(c.Amount)
		return c
	}
	return c
}
