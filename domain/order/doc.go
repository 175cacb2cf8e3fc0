// Package order is the order aggregate: commands, events, Decide and Evolve. It is pure: no I/O,
// no clock, no id generation.
//
// # Deciding and evolving
//
// An order's State is folded from its events with Evolve, starting from the zero State ("no
// order yet", Version 0). Decide checks a Command against a State and returns the events that
// record its outcome. Everything that varies comes from the caller: the order id
// (CreateOrder.OrderID), payment and refund ids, and now, which becomes the At of every event.
//
// What Decide's results mean:
//
//   - events, nil error: the command is accepted; append the events.
//   - no events, nil error: the command is already in effect (see below); nothing to append,
//     and the caller reports success.
//   - no events, error: the command is refused; the order is unchanged.
//   - events and an error: the command is refused, but something happened that must be kept.
//     This is the case of a ConfirmPayment the order cannot accept: the provider has already
//     taken the customer's money, so Decide returns a DuplicateChargeRecorded event for the
//     refund and the audit trail, together with the error.
//
// Callers must therefore append the returned events whenever len(events) > 0, even when
// err != nil, and only then report err. The order of the results is not an accident of
// implementation: refusing and recording are both the outcome of the callback, and a caller
// that dropped the event would lose track of the customer's money.
//
// # States
//
//	created → paying → paid → shipped
//	created, paying → cancelled
//	paying → created (the payment failed)
//	created → paid (a provider's success of the payment that failed last)
//	paid, shipped → refunding → refunded
//
// Lines can change only while created. There is one refund per order: it may be partial, and
// refunded is final. Every other transition fails with KindInvalidTransition. A duplicate
// charge or a provider's event the order cannot take is recorded in any status.
//
// Follows says which event can follow which state. Decide refuses by it, and an auditor checks
// a stored stream by it, so that the two cannot disagree on a log the service wrote.
//
// # Errors
//
// Every error Decide returns is an *Error whose Kind is one of KindInvalid ("invalid"),
// KindNotFound ("not-found"), KindAlreadyExists ("already-exists"), KindInvalidTransition
// ("invalid-transition") and KindRejected ("rejected"). Its State and Command name the order's
// status and the command. Test with errors.Is(err, order.KindRejected) or errors.As(err, &e).
// The line between the kinds: KindInvalid needs no order to decide (a malformed command),
// KindInvalidTransition depends only on the status, KindRejected on the order's other facts.
//
// # Business idempotency
//
// Without any idempotency key, a command that repeats a step the order has already taken,
// with the same identifying facts, decides no events and succeeds:
//
//   - StartPayment with the payment id and amount already started (or since confirmed),
//   - ConfirmPayment with the confirmed payment id and amount,
//   - Ship with the recorded carrier and tracking number, also after a refund began,
//   - RequestRefund with the refund id and amount already requested (or since completed),
//   - CompleteRefund with the completed refund id,
//   - ChangeLineQuantity to the quantity the line already has.
//
// The same commands with different facts are refused: Ship with another tracking number and
// CompleteRefund with another refund id after completion with KindInvalidTransition.
//
// A ConfirmPayment means money was captured. If the order does not accept it as its one
// payment, Decide refuses it and records a DuplicateChargeRecorded event with the payment id,
// the amount and a ChargeReason:
//
//   - another payment was already confirmed: KindRejected, ChargeAlreadyPaid;
//   - while paying, a payment id other than the one started: KindRejected,
//     ChargePaymentMismatch (the payment in progress stays in progress);
//   - while paying, the started payment id but an amount other than the total: KindRejected,
//     ChargeAmountMismatch (the order stays paying; fail or cancel it);
//   - the order is created (no payment started, or it failed) or cancelled:
//     KindInvalidTransition, ChargeNotAwaitingPayment.
//
// A payment id is recorded once: the provider retrying the same callback is refused again
// with KindRejected and no new event, and a recorded payment id can never become the order's
// payment. Refunding duplicate charges is done against the
// provider from the recorded events; it does not change the order's status.
//
// # Events
//
// Events carry explicit, versioned type names ("order.created.v2", …) and explicit camelCase
// JSON tags. Codec (see Events, Marshal and Unmarshal) encodes and decodes them by name; the
// encoded form of each type is golden-tested under testdata/. Earlier versions stay readable:
// upcast.go registers each with an upcaster to the next version, and the codec upcasts them on
// reading (their stored form is golden-tested under testdata/earlier/). Events hold domain facts only;
// metadata such as the idempotency key belongs to the store. Created is the only event that
// carries the order id.
package order
