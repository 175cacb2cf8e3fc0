package order_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/domain/order"
	"github.com/google/go-cmp/cmp"
)

var (
	t0  = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	now = time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)
)

func eur(amount int64) order.Money { return order.Money{Amount: amount, Currency: "EUR"} }

// Histories that bring an order into each status. The created order has one line, 2 × 500 EUR.
func hNone() []order.Event { return nil }

func hCreated() []order.Event {
	return []order.Event{
		order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po 7", At: t0},
		order.LineAdded{SKU: "A", Quantity: 2, UnitPrice: eur(500), At: t0},
	}
}

func hPaying() []order.Event {
	return append(hCreated(), order.PaymentStarted{PaymentID: "pay-1", Amount: eur(1000), At: t0})
}

func hPaid() []order.Event {
	return append(hPaying(), order.PaymentConfirmed{PaymentID: "pay-1", Amount: eur(1000), At: t0})
}

func hShipped() []order.Event {
	return append(hPaid(), order.Shipped{Carrier: "DHL", TrackingNumber: "TRK-1", At: t0})
}

func hCancelled() []order.Event {
	return append(hCreated(), order.Cancelled{Reason: "changed my mind", At: t0})
}

func hRefunding() []order.Event {
	return append(hPaid(), order.RefundRequested{RefundID: "ref-1", Amount: eur(400), At: t0})
}

func hRefunded() []order.Event {
	return append(hRefunding(), order.RefundCompleted{RefundID: "ref-1", Amount: eur(400), At: t0})
}

// The canonical command of each column of the matrix.
var (
	cCreate   = order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po 7", Channel: "web"}
	cAdd      = order.AddLine{SKU: "B", Quantity: 1, UnitPrice: eur(250)}
	cChange   = order.ChangeLineQuantity{SKU: "A", Quantity: 3}
	cRemove   = order.RemoveLine{SKU: "A"}
	cStart    = order.StartPayment{PaymentID: "pay-1", Amount: eur(1000)}
	cConfirm  = order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(1000)}
	cFail     = order.FailPayment{PaymentID: "pay-1", Reason: "card declined"}
	cCancel   = order.Cancel{Reason: "customer asked"}
	cShip     = order.Ship{Carrier: "DHL", TrackingNumber: "TRK-1"}
	cRefund   = order.RequestRefund{RefundID: "ref-1", Amount: eur(400)}
	cComplete = order.CompleteRefund{RefundID: "ref-1"}
)

var allCommands = []order.Command{cCreate, cAdd, cChange, cRemove, cStart, cConfirm, cFail, cCancel, cShip, cRefund, cComplete}

var allStatuses = []order.Status{
	order.StatusNone, order.StatusCreated, order.StatusPaying, order.StatusPaid,
	order.StatusShipped, order.StatusCancelled, order.StatusRefunding, order.StatusRefunded,
}

// Expected events of the canonical commands, when accepted.
var (
	eCreated   = order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po 7", Channel: "web", At: now}
	eAdded     = order.LineAdded{SKU: "B", Quantity: 1, UnitPrice: eur(250), At: now}
	eChanged   = order.LineQuantityChanged{SKU: "A", Quantity: 3, At: now}
	eRemoved   = order.LineRemoved{SKU: "A", At: now}
	eStarted   = order.PaymentStarted{PaymentID: "pay-1", Amount: eur(1000), At: now}
	eConfirmed = order.PaymentConfirmed{PaymentID: "pay-1", Amount: eur(1000), At: now}
	eFailed    = order.PaymentFailed{PaymentID: "pay-1", Reason: "card declined", At: now}
	eCancelled = order.Cancelled{Reason: "customer asked", At: now}
	eShipped   = order.Shipped{Carrier: "DHL", TrackingNumber: "TRK-1", At: now}
	eRequested = order.RefundRequested{RefundID: "ref-1", Amount: eur(400), At: now}
	eCompleted = order.RefundCompleted{RefundID: "ref-1", Amount: eur(400), At: now}
)

func dup(paymentID string, amount int64, reason order.ChargeReason) order.Event {
	return order.DuplicateChargeRecorded{PaymentID: paymentID, Amount: eur(amount), Reason: reason, At: now}
}

func evs(es ...order.Event) []order.Event { return es }

func fold(events []order.Event) order.State {
	var s order.State
	for _, e := range events {
		s = order.Evolve(s, e)
	}
	return s
}

// Kinds, short for the table.
const (
	ok         order.Kind = 0
	invalid               = order.KindInvalid
	notFound              = order.KindNotFound
	exists                = order.KindAlreadyExists
	transition            = order.KindInvalidTransition
	tooEarly              = order.KindTooEarly
	rejected              = order.KindRejected
)

type decideCase struct {
	given func() []order.Event // the order's history
	when  order.Command
	then  []order.Event // exactly the events Decide must return
	kind  order.Kind    // the error kind Decide must return; ok for none
}

// TestDecide is the whole state × command matrix, one row per cell with the column's canonical
// command (checked to be complete below), followed by the variants each cell hides.
func TestDecide(t *testing.T) {
	tooManyLines := make([]order.AddLine, order.MaxLines+1)
	for i := range tooManyLines {
		tooManyLines[i] = order.AddLine{SKU: fmt.Sprint("S", i), Quantity: 1, UnitPrice: eur(1)}
	}
	fullOrder := hCreated()
	for i := 1; i < order.MaxLines; i++ {
		fullOrder = append(fullOrder, order.LineAdded{SKU: fmt.Sprint("S", i), Quantity: 1, UnitPrice: eur(1), At: t0})
	}
	emptied := append(hCreated(), order.LineRemoved{SKU: "A", At: t0})
	failed := append(hPaying(), order.PaymentFailed{PaymentID: "pay-1", Reason: "declined", At: t0})
	cancelledWhilePaying := append(hPaying(), order.Cancelled{Reason: "too slow", At: t0})
	dupRecorded := append(hPaid(), order.DuplicateChargeRecorded{PaymentID: "pay-2", Amount: eur(1000), Reason: order.ChargeAlreadyPaid, At: t0})
	refundingShipped := append(hShipped(), order.RefundRequested{RefundID: "ref-1", Amount: eur(1000), At: t0})
	given := func(h []order.Event) func() []order.Event { return func() []order.Event { return h } }

	cases := map[string]decideCase{
		// One row per cell, with the column's canonical command.
		"none/create-order":         {hNone, cCreate, evs(eCreated), ok},
		"none/add-line":             {hNone, cAdd, nil, notFound},
		"none/change-line-quantity": {hNone, cChange, nil, notFound},
		"none/remove-line":          {hNone, cRemove, nil, notFound},
		"none/start-payment":        {hNone, cStart, nil, notFound},
		"none/confirm-payment":      {hNone, cConfirm, nil, notFound},
		"none/fail-payment":         {hNone, cFail, nil, notFound},
		"none/cancel":               {hNone, cCancel, nil, notFound},
		"none/ship":                 {hNone, cShip, nil, notFound},
		"none/request-refund":       {hNone, cRefund, nil, notFound},
		"none/complete-refund":      {hNone, cComplete, nil, notFound},
		"created/create-order":      {hCreated, cCreate, nil, exists},
		"created/add-line":          {hCreated, cAdd, evs(eAdded), ok},
		"created/change-line-qty":   {hCreated, cChange, evs(eChanged), ok},
		"created/remove-line":       {hCreated, cRemove, evs(eRemoved), ok},
		"created/start-payment":     {hCreated, cStart, evs(eStarted), ok},
		"created/confirm-payment":   {hCreated, cConfirm, evs(dup("pay-1", 1000, order.ChargeNotAwaitingPayment)), transition},
		"created/fail-payment":      {hCreated, cFail, nil, transition},
		"created/cancel":            {hCreated, cCancel, evs(eCancelled), ok},
		"created/ship":              {hCreated, cShip, nil, transition},
		"created/request-refund":    {hCreated, cRefund, nil, transition},
		"created/complete-refund":   {hCreated, cComplete, nil, transition},
		"paying/create-order":       {hPaying, cCreate, nil, exists},
		"paying/add-line":           {hPaying, cAdd, nil, transition},
		"paying/change-line-qty":    {hPaying, cChange, nil, transition},
		"paying/remove-line":        {hPaying, cRemove, nil, transition},
		"paying/start-payment":      {hPaying, cStart, nil, ok}, // same payment: already started
		"paying/confirm-payment":    {hPaying, cConfirm, evs(eConfirmed), ok},
		"paying/fail-payment":       {hPaying, cFail, evs(eFailed), ok},
		"paying/cancel":             {hPaying, cCancel, evs(eCancelled), ok},
		"paying/ship":               {hPaying, cShip, nil, transition},
		"paying/request-refund":     {hPaying, cRefund, nil, transition},
		"paying/complete-refund":    {hPaying, cComplete, nil, transition},
		"paid/create-order":         {hPaid, cCreate, nil, exists},
		"paid/add-line":             {hPaid, cAdd, nil, transition},
		"paid/change-line-qty":      {hPaid, cChange, nil, transition},
		"paid/remove-line":          {hPaid, cRemove, nil, transition},
		"paid/start-payment":        {hPaid, cStart, nil, ok},
		"paid/confirm-payment":      {hPaid, cConfirm, nil, ok}, // the provider's retry
		"paid/fail-payment":         {hPaid, cFail, nil, transition},
		"paid/cancel":               {hPaid, cCancel, nil, transition},
		"paid/ship":                 {hPaid, cShip, evs(eShipped), ok},
		"paid/request-refund":       {hPaid, cRefund, evs(eRequested), ok},
		"paid/complete-refund":      {hPaid, cComplete, nil, transition},
		"shipped/create-order":      {hShipped, cCreate, nil, exists},
		"shipped/add-line":          {hShipped, cAdd, nil, transition},
		"shipped/change-line-qty":   {hShipped, cChange, nil, transition},
		"shipped/remove-line":       {hShipped, cRemove, nil, transition},
		"shipped/start-payment":     {hShipped, cStart, nil, ok},
		"shipped/confirm-payment":   {hShipped, cConfirm, nil, ok},
		"shipped/fail-payment":      {hShipped, cFail, nil, transition},
		"shipped/cancel":            {hShipped, cCancel, nil, transition},
		"shipped/ship":              {hShipped, cShip, nil, ok}, // same tracking number
		"shipped/request-refund":    {hShipped, cRefund, evs(eRequested), ok},
		"shipped/complete-refund":   {hShipped, cComplete, nil, transition},
		"cancelled/create-order":    {hCancelled, cCreate, nil, exists},
		"cancelled/add-line":        {hCancelled, cAdd, nil, transition},
		"cancelled/change-line-qty": {hCancelled, cChange, nil, transition},
		"cancelled/remove-line":     {hCancelled, cRemove, nil, transition},
		"cancelled/start-payment":   {hCancelled, cStart, nil, transition},
		"cancelled/confirm-payment": {hCancelled, cConfirm, evs(dup("pay-1", 1000, order.ChargeNotAwaitingPayment)), transition},
		"cancelled/fail-payment":    {hCancelled, cFail, nil, transition},
		"cancelled/cancel":          {hCancelled, cCancel, nil, transition},
		"cancelled/ship":            {hCancelled, cShip, nil, transition},
		"cancelled/request-refund":  {hCancelled, cRefund, nil, transition},
		"cancelled/complete-refund": {hCancelled, cComplete, nil, transition},
		"refunding/create-order":    {hRefunding, cCreate, nil, exists},
		"refunding/add-line":        {hRefunding, cAdd, nil, transition},
		"refunding/change-line-qty": {hRefunding, cChange, nil, transition},
		"refunding/remove-line":     {hRefunding, cRemove, nil, transition},
		"refunding/start-payment":   {hRefunding, cStart, nil, ok},
		"refunding/confirm-payment": {hRefunding, cConfirm, nil, ok},
		"refunding/fail-payment":    {hRefunding, cFail, nil, transition},
		"refunding/cancel":          {hRefunding, cCancel, nil, transition},
		"refunding/ship":            {hRefunding, cShip, nil, transition}, // refunding from paid: never shipped
		"refunding/request-refund":  {hRefunding, cRefund, nil, ok},       // same refund
		"refunding/complete-refund": {hRefunding, cComplete, evs(eCompleted), ok},
		"refunded/create-order":     {hRefunded, cCreate, nil, exists},
		"refunded/add-line":         {hRefunded, cAdd, nil, transition},
		"refunded/change-line-qty":  {hRefunded, cChange, nil, transition},
		"refunded/remove-line":      {hRefunded, cRemove, nil, transition},
		"refunded/start-payment":    {hRefunded, cStart, nil, ok},
		"refunded/confirm-payment":  {hRefunded, cConfirm, nil, ok},
		"refunded/fail-payment":     {hRefunded, cFail, nil, transition},
		"refunded/cancel":           {hRefunded, cCancel, nil, transition},
		"refunded/ship":             {hRefunded, cShip, nil, transition},
		"refunded/request-refund":   {hRefunded, cRefund, nil, ok},
		"refunded/complete-refund":  {hRefunded, cComplete, nil, ok},

		// Variants of the cells above.
		"none/invalid command":       {hNone, order.AddLine{}, nil, notFound},
		"created/invalid create":     {hCreated, order.CreateOrder{}, nil, exists},
		"none/nil command":           {hNone, nil, nil, invalid},
		"created/pointer command":    {hCreated, &cAdd, nil, invalid},
		"refunded/nil command":       {hRefunded, nil, nil, invalid},
		"cancelled/cancel invalid":   {hCancelled, order.Cancel{}, nil, invalid},
		"shipped/ship other carrier": {hShipped, order.Ship{Carrier: "UPS", TrackingNumber: "TRK-1"}, nil, transition},

		// CreateOrder.
		"create with lines": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Name: "Apples", Quantity: 2, UnitPrice: eur(500)}, {SKU: "B", Quantity: 1, UnitPrice: eur(250)}}},
			evs(order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: order.ChannelDefault, At: now},
				order.LineAdded{SKU: "A", Name: "Apples", Quantity: 2, UnitPrice: eur(500), At: now},
				order.LineAdded{SKU: "B", Quantity: 1, UnitPrice: eur(250), At: now}), ok},
		"create with a sku twice at one price merges": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Quantity: 2, UnitPrice: eur(500)}, {SKU: "A", Quantity: 3, UnitPrice: eur(500)}}},
			evs(order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: order.ChannelDefault, At: now},
				order.LineAdded{SKU: "A", Quantity: 2, UnitPrice: eur(500), At: now},
				order.LineQuantityChanged{SKU: "A", Quantity: 5, At: now}), ok},
		"create with a sku at two prices": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Quantity: 2, UnitPrice: eur(500)}, {SKU: "A", Quantity: 3, UnitPrice: eur(501)}}}, nil, invalid},
		"create with a line in another currency": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Quantity: 2, UnitPrice: order.Money{Amount: 500, Currency: "USD"}}}}, nil, invalid},
		"create with an invalid line": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Quantity: 0, UnitPrice: eur(500)}}}, nil, invalid},
		"create with too many lines":        {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Lines: tooManyLines}, nil, invalid},
		"create without order id":           {hNone, order.CreateOrder{CustomerID: "cus-1", Currency: "EUR"}, nil, invalid},
		"create without customer":           {hNone, order.CreateOrder{OrderID: "ord-1", Currency: "EUR"}, nil, invalid},
		"create with lower-case currency":   {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "eur"}, nil, invalid},
		"create with a 4-letter currency":   {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EURO"}, nil, invalid},
		"create with a space in the id":     {hNone, order.CreateOrder{OrderID: "ord 1", CustomerID: "cus-1", Currency: "EUR"}, nil, invalid},
		"create with a control char ref":    {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po\n7"}, nil, invalid},
		"create with an over-long id":       {hNone, order.CreateOrder{OrderID: strings.Repeat("x", order.MaxIDLen+1), CustomerID: "cus-1", Currency: "EUR"}, nil, invalid},
		"create with invalid utf-8":         {hNone, order.CreateOrder{OrderID: "ord-\xff", CustomerID: "cus-1", Currency: "EUR"}, nil, invalid},
		"create with an upper-case channel": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: "Web"}, nil, invalid},
		"create with a channel of 33 bytes": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: strings.Repeat("w", 33)}, nil, invalid},
		"create with a channel of 32 bytes": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: "w" + strings.Repeat("-9", 15) + "x"},
			evs(order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", Channel: "w" + strings.Repeat("-9", 15) + "x", At: now}), ok},
		"create with a name too long": {hNone, order.CreateOrder{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR",
			Lines: []order.AddLine{{SKU: "A", Name: strings.Repeat("n", order.MaxNameLen+1), Quantity: 1, UnitPrice: eur(500)}}}, nil, invalid},

		// AddLine.
		"add an existing sku at its price adds quantity": {hCreated, order.AddLine{SKU: "A", Quantity: 3, UnitPrice: eur(500)},
			evs(order.LineQuantityChanged{SKU: "A", Quantity: 5, At: now}), ok},
		"add an existing sku with a name keeps the line's": {hCreated, order.AddLine{SKU: "A", Name: "Apples", Quantity: 3, UnitPrice: eur(500)},
			evs(order.LineQuantityChanged{SKU: "A", Quantity: 5, At: now}), ok},
		"add a line with a name":               {hCreated, order.AddLine{SKU: "B", Name: "Bread, 1 kg", Quantity: 1, UnitPrice: eur(250)}, evs(order.LineAdded{SKU: "B", Name: "Bread, 1 kg", Quantity: 1, UnitPrice: eur(250), At: now}), ok},
		"add a line with a name on two lines":  {hCreated, order.AddLine{SKU: "B", Name: "Bread\n1 kg", Quantity: 1, UnitPrice: eur(250)}, nil, invalid},
		"add an existing sku at another price": {hCreated, order.AddLine{SKU: "A", Quantity: 1, UnitPrice: eur(499)}, nil, rejected},
		"add a line in another currency":       {hCreated, order.AddLine{SKU: "B", Quantity: 1, UnitPrice: order.Money{Amount: 250, Currency: "USD"}}, nil, rejected},
		"add past the quantity limit":          {hCreated, order.AddLine{SKU: "A", Quantity: order.MaxQuantity - 1, UnitPrice: eur(500)}, nil, rejected},
		"add up to the quantity limit": {hCreated, order.AddLine{SKU: "A", Quantity: order.MaxQuantity - 2, UnitPrice: eur(500)},
			evs(order.LineQuantityChanged{SKU: "A", Quantity: order.MaxQuantity, At: now}), ok},
		"add to a full order":           {given(fullOrder), cAdd, nil, rejected},
		"add to a full order's line":    {given(fullOrder), order.AddLine{SKU: "A", Quantity: 1, UnitPrice: eur(500)}, evs(order.LineQuantityChanged{SKU: "A", Quantity: 3, At: now}), ok},
		"add quantity 0":                {hCreated, order.AddLine{SKU: "B", Quantity: 0, UnitPrice: eur(250)}, nil, invalid},
		"add quantity -1":               {hCreated, order.AddLine{SKU: "B", Quantity: -1, UnitPrice: eur(250)}, nil, invalid},
		"add quantity over the limit":   {hCreated, order.AddLine{SKU: "B", Quantity: order.MaxQuantity + 1, UnitPrice: eur(250)}, nil, invalid},
		"add a free line":               {hCreated, order.AddLine{SKU: "B", Quantity: 1, UnitPrice: eur(0)}, nil, invalid},
		"add a negative price":          {hCreated, order.AddLine{SKU: "B", Quantity: 1, UnitPrice: eur(-1)}, nil, invalid},
		"add a price over the limit":    {hCreated, order.AddLine{SKU: "B", Quantity: 1, UnitPrice: eur(order.MaxUnitPrice + 1)}, nil, invalid},
		"add the largest line":          {hCreated, order.AddLine{SKU: "B", Quantity: order.MaxQuantity, UnitPrice: eur(order.MaxUnitPrice)}, evs(order.LineAdded{SKU: "B", Quantity: order.MaxQuantity, UnitPrice: eur(order.MaxUnitPrice), At: now}), ok},
		"add a price without currency":  {hCreated, order.AddLine{SKU: "B", Quantity: 1, UnitPrice: order.Money{Amount: 250}}, nil, invalid},
		"add without sku":               {hCreated, order.AddLine{Quantity: 1, UnitPrice: eur(250)}, nil, invalid},
		"add a sku with a space":        {hCreated, order.AddLine{SKU: "B 1", Quantity: 1, UnitPrice: eur(250)}, nil, invalid},
		"add an invalid line when paid": {hPaid, order.AddLine{}, nil, invalid},

		// ChangeLineQuantity and RemoveLine.
		"change a missing line":             {hCreated, order.ChangeLineQuantity{SKU: "Z", Quantity: 1}, nil, notFound},
		"change to the same quantity":       {hCreated, order.ChangeLineQuantity{SKU: "A", Quantity: 2}, nil, ok},
		"change to quantity 0":              {hCreated, order.ChangeLineQuantity{SKU: "A", Quantity: 0}, nil, invalid},
		"change past the quantity limit":    {hCreated, order.ChangeLineQuantity{SKU: "A", Quantity: order.MaxQuantity + 1}, nil, invalid},
		"remove a missing line":             {hCreated, order.RemoveLine{SKU: "Z"}, nil, notFound},
		"remove without sku":                {hCreated, order.RemoveLine{}, nil, invalid},
		"edit again after a failed payment": {given(failed), cAdd, evs(eAdded), ok},

		// StartPayment.
		"start for another amount":                          {hCreated, order.StartPayment{PaymentID: "pay-1", Amount: eur(999)}, nil, rejected},
		"start in another currency":                         {hCreated, order.StartPayment{PaymentID: "pay-1", Amount: order.Money{Amount: 1000, Currency: "USD"}}, nil, rejected},
		"start an empty order":                              {given(emptied), order.StartPayment{PaymentID: "pay-1", Amount: eur(1)}, nil, rejected},
		"start for nothing":                                 {hCreated, order.StartPayment{PaymentID: "pay-1", Amount: eur(0)}, nil, invalid},
		"start without payment id":                          {hCreated, order.StartPayment{Amount: eur(1000)}, nil, invalid},
		"start another payment while paying":                {hPaying, order.StartPayment{PaymentID: "pay-2", Amount: eur(1000)}, nil, transition},
		"start the payment for another amount while paying": {hPaying, order.StartPayment{PaymentID: "pay-1", Amount: eur(999)}, nil, transition},
		"start another payment when paid":                   {hPaid, order.StartPayment{PaymentID: "pay-2", Amount: eur(1000)}, nil, transition},
		"start again after a failure":                       {given(failed), cStart, evs(eStarted), ok},
		"start the paying id when cancelled":                {given(cancelledWhilePaying), cStart, nil, transition},

		// ConfirmPayment: the double charge of seed 001.
		"confirm another payment when paid": {hPaid, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)},
			evs(dup("pay-2", 1000, order.ChargeAlreadyPaid)), rejected},
		"confirm another payment when shipped": {hShipped, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)},
			evs(dup("pay-2", 1000, order.ChargeAlreadyPaid)), rejected},
		"confirm another payment when refunding": {hRefunding, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(700)},
			evs(dup("pay-2", 700, order.ChargeAlreadyPaid)), rejected},
		"confirm another payment when refunded": {hRefunded, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)},
			evs(dup("pay-2", 1000, order.ChargeAlreadyPaid)), rejected},
		"confirm a recorded duplicate again":          {given(dupRecorded), order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)}, nil, rejected},
		"confirm the paid payment for another amount": {hPaid, order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(999)}, nil, rejected},
		"confirm another payment while paying": {hPaying, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)},
			evs(dup("pay-2", 1000, order.ChargePaymentMismatch)), rejected},
		"confirm for another amount while paying": {hPaying, order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(999)},
			evs(dup("pay-1", 999, order.ChargeAmountMismatch)), rejected},
		"confirm in another currency while paying": {hPaying, order.ConfirmPayment{PaymentID: "pay-1", Amount: order.Money{Amount: 1000, Currency: "USD"}},
			evs(order.DuplicateChargeRecorded{PaymentID: "pay-1", Amount: order.Money{Amount: 1000, Currency: "USD"}, Reason: order.ChargeAmountMismatch, At: now}), rejected},
		"confirm a failed payment late": {given(failed), cConfirm,
			evs(dup("pay-1", 1000, order.ChargeNotAwaitingPayment)), transition},
		"confirm after cancelling while paying": {given(cancelledWhilePaying), cConfirm,
			evs(dup("pay-1", 1000, order.ChargeNotAwaitingPayment)), transition},
		"confirm without payment id": {hPaying, order.ConfirmPayment{Amount: eur(1000)}, nil, invalid},
		"confirm a negative amount":  {hPaid, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(-1000)}, nil, invalid},
		"confirm an absurd amount":   {hPaid, order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(order.MaxAmount + 1)}, nil, invalid},

		// FailPayment and Cancel.
		"fail another payment":          {hPaying, order.FailPayment{PaymentID: "pay-0", Reason: "declined"}, nil, rejected},
		"fail without reason":           {hPaying, order.FailPayment{PaymentID: "pay-1"}, nil, invalid},
		"fail with a blank reason":      {hPaying, order.FailPayment{PaymentID: "pay-1", Reason: "  "}, nil, invalid},
		"fail with a padded reason":     {hPaying, order.FailPayment{PaymentID: "pay-1", Reason: " declined"}, nil, invalid},
		"fail with an over-long reason": {hPaying, order.FailPayment{PaymentID: "pay-1", Reason: strings.Repeat("x", order.MaxTextLen+1)}, nil, invalid},
		"fail twice":                    {given(failed), cFail, nil, transition},
		"cancel without reason":         {hCreated, order.Cancel{}, nil, invalid},

		// Ship.
		"ship another tracking number":     {hShipped, order.Ship{Carrier: "DHL", TrackingNumber: "TRK-2"}, nil, transition},
		"ship again while refunding":       {given(refundingShipped), cShip, nil, ok},
		"ship another one while refunding": {given(refundingShipped), order.Ship{Carrier: "DHL", TrackingNumber: "TRK-2"}, nil, transition},
		"ship without tracking number":     {hPaid, order.Ship{Carrier: "DHL"}, nil, invalid},
		"ship without carrier":             {hPaid, order.Ship{TrackingNumber: "TRK-1"}, nil, invalid},

		// RequestRefund and CompleteRefund.
		"refund everything":                      {hPaid, order.RequestRefund{RefundID: "ref-1", Amount: eur(1000)}, evs(order.RefundRequested{RefundID: "ref-1", Amount: eur(1000), At: now}), ok},
		"refund more than paid":                  {hPaid, order.RequestRefund{RefundID: "ref-1", Amount: eur(1001)}, nil, rejected},
		"refund in another currency":             {hPaid, order.RequestRefund{RefundID: "ref-1", Amount: order.Money{Amount: 400, Currency: "USD"}}, nil, rejected},
		"refund nothing":                         {hPaid, order.RequestRefund{RefundID: "ref-1", Amount: eur(0)}, nil, invalid},
		"refund without refund id":               {hPaid, order.RequestRefund{Amount: eur(400)}, nil, invalid},
		"request another refund while refunding": {hRefunding, order.RequestRefund{RefundID: "ref-2", Amount: eur(400)}, nil, transition},
		"request the refund for another amount":  {hRefunding, order.RequestRefund{RefundID: "ref-1", Amount: eur(500)}, nil, transition},
		"request a second refund":                {hRefunded, order.RequestRefund{RefundID: "ref-2", Amount: eur(600)}, nil, transition},
		"complete another refund":                {hRefunding, order.CompleteRefund{RefundID: "ref-2"}, nil, rejected},
		"complete another refund when done":      {hRefunded, order.CompleteRefund{RefundID: "ref-2"}, nil, transition},
		"complete without refund id":             {hRefunding, order.CompleteRefund{}, nil, invalid},
		"complete for the amount requested":      {hRefunding, order.CompleteRefund{RefundID: "ref-1", Amount: eur(400)}, evs(eCompleted), ok},
		"complete for another amount":            {hRefunding, order.CompleteRefund{RefundID: "ref-1", Amount: eur(500)}, nil, rejected},
		"complete again for another amount":      {hRefunded, order.CompleteRefund{RefundID: "ref-1", Amount: eur(500)}, nil, rejected},
		"complete a refund made at the provider": {hPaid, order.CompleteRefund{RefundID: "ref-9", Amount: eur(400)},
			evs(order.RefundRequested{RefundID: "ref-9", Amount: eur(400), At: now}, order.RefundCompleted{RefundID: "ref-9", Amount: eur(400), At: now}), ok},
		"complete a refund made at the provider of too much": {hPaid, order.CompleteRefund{RefundID: "ref-9", Amount: eur(1001)}, nil, rejected},

		// ProviderEvent: what the order cannot take is recorded, with the error that says why.
		"provider confirms the payment":        {hPaying, reported(cConfirm), evs(eConfirmed), ok},
		"provider confirms it again":           {hPaid, reported(cConfirm), nil, ok},
		"provider confirms a failed payment":   {given(failed), reported(cConfirm), evs(eConfirmed), ok},
		"provider confirms it for less":        {given(failed), reported(order.ConfirmPayment{PaymentID: "pay-1", Amount: eur(999)}), evs(dup("pay-1", 999, order.ChargeNotAwaitingPayment)), transition},
		"provider confirms a second payment":   {hPaid, reported(order.ConfirmPayment{PaymentID: "pay-2", Amount: eur(1000)}), evs(dup("pay-2", 1000, order.ChargeAlreadyPaid)), rejected},
		"provider fails a paid payment":        {hPaid, reported(cFail), evs(unapplied("no payment is in progress")), transition},
		"provider fails another payment":       {hPaying, reported(order.FailPayment{PaymentID: "pay-0", Reason: "declined"}), evs(unapplied("payment pay-1 is in progress, not pay-0")), rejected},
		"provider fails without a reason":      {hPaying, reported(order.FailPayment{PaymentID: "pay-1"}), evs(unapplied("reason is required")), invalid},
		"provider refunds before the payment":  {hPaying, reported(order.CompleteRefund{RefundID: "ref-9", Amount: eur(1000)}), nil, tooEarly},
		"provider refunds a paid order":        {hPaid, reported(order.CompleteRefund{RefundID: "ref-9", Amount: eur(400)}), evs(order.RefundRequested{RefundID: "ref-9", Amount: eur(400), At: now}, order.RefundCompleted{RefundID: "ref-9", Amount: eur(400), At: now}), ok},
		"provider refunds too much":            {hPaid, reported(order.CompleteRefund{RefundID: "ref-9", Amount: eur(1001)}), evs(unapplied("refund of 1001 EUR exceeds the 1000 EUR paid and not refunded")), rejected},
		"provider refunds a cancelled order":   {hCancelled, reported(order.CompleteRefund{RefundID: "ref-9", Amount: eur(400)}), evs(unapplied("no refund is in progress")), transition},
		"provider reports a cancel":            {hPaying, reported(cCancel), nil, invalid},
		"provider reports on no order":         {hNone, reported(cConfirm), nil, notFound},
		"provider reports without an event id": {hPaying, order.ProviderEvent{Provider: "psp", EventType: "payment.succeeded", Report: cConfirm}, nil, invalid},
	}

	covered := map[string]bool{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := fold(tc.given())
			before := fold(tc.given())
			events, err := order.Decide(s, tc.when, now)

			if diff := cmp.Diff(tc.then, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, s); diff != "" {
				t.Errorf("Decide changed its state (-before +after):\n%s", diff)
			}
			if tc.kind == ok {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %s", err, tc.kind)
			}
			var e *order.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %T, want *order.Error", err)
			}
			name := ""
			if tc.when != nil {
				name = tc.when.CommandName()
			}
			if e.State != s.Status || e.Command != name || e.Msg == "" {
				t.Errorf("error names state %s, command %q, msg %q; want state %s, command %q and a message", e.State, e.Command, e.Msg, s.Status, name)
			}
		})
		if tc.when != nil {
			covered[fold(tc.given()).Status.String()+"/"+tc.when.CommandName()] = true
		}
	}
	for _, st := range allStatuses {
		for _, c := range allCommands {
			if cell := st.String() + "/" + c.CommandName(); !covered[cell] {
				t.Errorf("matrix cell %s is not asserted", cell)
			}
		}
	}
}

// reported is c as provider psp's event evt-1 reports it.
func reported(c order.Command) order.ProviderEvent {
	return order.ProviderEvent{Provider: "psp", EventID: "evt-1", EventType: "payment.reported", Report: c}
}

// unapplied is the record of a reported command, not applied for reason.
func unapplied(reason string) order.ProviderEventUnapplied {
	return order.ProviderEventUnapplied{Provider: "psp", EventID: "evt-1", Type: "payment.reported", Reason: reason, At: now}
}

// The events Decide returns for the canonical cells are checked above against literal values;
// this checks that folding them gives the state a reader expects, for the fields later layers
// use.
func TestEvolveState(t *testing.T) {
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	h := []order.Event{
		order.Created{OrderID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po 7", At: created},
		order.LineAdded{SKU: "B", Quantity: 1, UnitPrice: eur(250), At: created},
		order.LineAdded{SKU: "A", Quantity: 2, UnitPrice: eur(500), At: created},
		order.LineAdded{SKU: "C", Quantity: 1, UnitPrice: eur(1), At: created},
		order.LineQuantityChanged{SKU: "B", Quantity: 3, At: created},
		order.LineRemoved{SKU: "C", At: created},
		order.PaymentStarted{PaymentID: "pay-1", Amount: eur(1750), At: created},
		order.PaymentConfirmed{PaymentID: "pay-1", Amount: eur(1750), At: created},
		order.DuplicateChargeRecorded{PaymentID: "pay-2", Amount: eur(1750), Reason: order.ChargeAlreadyPaid, At: created},
		order.Shipped{Carrier: "DHL", TrackingNumber: "TRK-1", At: created},
		order.RefundRequested{RefundID: "ref-1", Amount: eur(500), At: created},
		order.RefundCompleted{RefundID: "ref-1", Amount: eur(500), At: now},
	}
	want := order.State{
		ID: "ord-1", CustomerID: "cus-1", Currency: "EUR", ClientRef: "po 7",
		Status: order.StatusRefunded,
		Lines: []order.Line{
			{SKU: "B", Quantity: 3, UnitPrice: eur(250)},
			{SKU: "A", Quantity: 2, UnitPrice: eur(500)},
		},
		Total:         eur(1750),
		PaymentID:     "pay-1",
		Paid:          eur(1750),
		RefundID:      "ref-1",
		PendingRefund: eur(0),
		Refunded:      eur(500),
		Carrier:       "DHL", TrackingNumber: "TRK-1",
		DuplicateCharges: order.NewCharges(order.Charge{PaymentID: "pay-2", Amount: eur(1750), Reason: order.ChargeAlreadyPaid, At: created}),
		Version:          12,
		CreatedAt:        created,
		UpdatedAt:        now,
	}
	if diff := cmp.Diff(want, fold(h)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}

	if s := fold(nil); s.Version != 0 || s.Status != order.StatusNone {
		t.Errorf("zero state: version %d, status %s; want 0, none", s.Version, s.Status)
	}
	failed := fold(append(hPaying(), order.PaymentFailed{PaymentID: "pay-1", Reason: "declined", At: now}))
	if failed.Status != order.StatusCreated || failed.PaymentID != "" {
		t.Errorf("after a failed payment: status %s, payment %q; want created, no payment", failed.Status, failed.PaymentID)
	}
	cancelled := fold(hCancelled())
	if cancelled.CancelReason != "changed my mind" {
		t.Errorf("cancel reason %q", cancelled.CancelReason)
	}
	if emptied := fold(append(hCreated(), order.LineRemoved{SKU: "A", At: now})); emptied.Lines != nil || emptied.Total != eur(0) {
		t.Errorf("after removing the last line: lines %v, total %v; want nil, 0 EUR", emptied.Lines, emptied.Total)
	}
}

// A State is a value: evolving a copy along two paths must not let one path see the other.
func TestEvolveValueSemantics(t *testing.T) {
	base := fold(append(hPaid(),
		order.DuplicateChargeRecorded{PaymentID: "pay-2", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
		order.DuplicateChargeRecorded{PaymentID: "pay-3", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
		order.DuplicateChargeRecorded{PaymentID: "pay-4", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
	))
	snapshot := fold(append(hPaid(),
		order.DuplicateChargeRecorded{PaymentID: "pay-2", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
		order.DuplicateChargeRecorded{PaymentID: "pay-3", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
		order.DuplicateChargeRecorded{PaymentID: "pay-4", Amount: eur(1), Reason: order.ChargeAlreadyPaid, At: t0},
	))
	a := order.Evolve(base, order.DuplicateChargeRecorded{PaymentID: "pay-a", Amount: eur(1), At: now})
	b := order.Evolve(base, order.DuplicateChargeRecorded{PaymentID: "pay-b", Amount: eur(1), At: now})
	if got := slices.Collect(a.DuplicateCharges.All())[3].PaymentID; got != "pay-a" {
		t.Errorf("path a sees charge %s, want pay-a", got)
	}
	if got := slices.Collect(b.DuplicateCharges.All())[3].PaymentID; got != "pay-b" {
		t.Errorf("path b sees charge %s, want pay-b", got)
	}
	if diff := cmp.Diff(snapshot, base); diff != "" {
		t.Errorf("evolving changed the original (-before +after):\n%s", diff)
	}

	lines := fold(append(hCreated(), order.LineAdded{SKU: "B", Quantity: 1, UnitPrice: eur(1), At: t0}))
	lines.Lines = slices.Grow(lines.Lines, 10) // spare capacity that an append could write into
	keep := slices.Clone(lines.Lines)
	for _, e := range []order.Event{
		order.LineAdded{SKU: "C", Quantity: 1, UnitPrice: eur(1), At: now},
		order.LineAdded{SKU: "A", Quantity: 9, UnitPrice: eur(9), At: now},
		order.LineQuantityChanged{SKU: "A", Quantity: 7, At: now},
		order.LineRemoved{SKU: "A", At: now},
	} {
		order.Evolve(lines, e)
		if diff := cmp.Diff(keep, lines.Lines); diff != "" {
			t.Errorf("%s changed the original's lines (-before +after):\n%s", e.EventType(), diff)
		}
		if got := lines.Lines[:cap(lines.Lines)][len(keep)]; got != (order.Line{}) {
			t.Errorf("%s wrote %v into the original's spare capacity", e.EventType(), got)
		}
	}
}

func TestEvolveIgnoresNonEvents(t *testing.T) {
	s := fold(hPaid())
	for _, e := range []order.Event{nil, &order.Shipped{Carrier: "DHL", TrackingNumber: "T", At: now}, (*order.Cancelled)(nil)} {
		if diff := cmp.Diff(s, order.Evolve(s, e)); diff != "" {
			t.Errorf("Evolve(%#v) changed the state:\n%s", e, diff)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	codes := map[order.Kind]string{
		order.KindInvalid:           "invalid",
		order.KindNotFound:          "not-found",
		order.KindAlreadyExists:     "already-exists",
		order.KindInvalidTransition: "invalid-transition",
		order.KindRejected:          "rejected",
	}
	for k, code := range codes {
		if k.String() != code {
			t.Errorf("Kind %d code = %q, want %q", k, k.String(), code)
		}
	}
	// fmt prefers Error to String; both must give the code.
	if got := fmt.Sprint(order.KindRejected); got != "rejected" {
		t.Errorf("printing a Kind gives %q, want its code", got)
	}
	if got := order.Kind(0).String(); got != "kind(0)" {
		t.Errorf("zero kind = %q", got)
	}

	_, err := order.Decide(fold(hCreated()), cShip, now)
	want := "order: ship in state created: only a paid order can be shipped (invalid-transition)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	if errors.Is(err, order.KindRejected) {
		t.Errorf("an invalid-transition error matches KindRejected")
	}
	wrapped := fmt.Errorf("handle: %w", err)
	var e *order.Error
	if !errors.Is(wrapped, order.KindInvalidTransition) || !errors.As(wrapped, &e) || e.Command != "ship" {
		t.Errorf("wrapped error lost its kind: %v", wrapped)
	}
}

// Events take their time from now, in UTC and without a monotonic reading, so that what is
// stored does not depend on the caller's time zone.
func TestDecideTimeIsUTC(t *testing.T) {
	local := time.Now().In(time.FixedZone("CEST", 2*60*60))
	events, err := order.Decide(order.State{}, cCreate, local)
	if err != nil {
		t.Fatal(err)
	}
	at := events[0].(order.Created).At
	if at.Location() != time.UTC || !at.Equal(local) || at != at.Round(0) {
		t.Errorf("At = %v (%v), want %v in UTC without monotonic reading", at, at.Location(), local)
	}
}
