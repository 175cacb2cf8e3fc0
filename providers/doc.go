// Package providers verifies and reads the signed callbacks of payment providers: the
// deliveries they POST to /v1/provider-events/{provider} when a payment succeeds or fails or
// a refund completes.
//
// A providers file names each provider, the principal whose orders its events act on, its
// scheme and its signing secrets:
//
//	{"providers": [
//	  {"name": "acme-pay", "principal": "shop-1", "scheme": "standard-webhooks", "secrets": ["whsec_…"]},
//	  {"name": "stripe", "principal": "shop-1", "scheme": "stripe", "secrets": ["whsec_…", "whsec_…"]}
//	]}
//
// Two secrets are for a rotation: a delivery signed with either verifies, so the provider can
// switch to the new one while the old still holds; then the old one is removed. Secrets never
// print: Secret, Provider and Set format and log without them.
//
// A delivery is first verified (Provider.Verify), from the raw body's bytes and the headers
// alone, then read (Provider.Read). Both schemes sign an HMAC-SHA256 of the delivery's
// timestamp and body, and Verify refuses a timestamp more than Tolerance from now, either
// way, so that a captured delivery cannot be replayed later. Every comparison of signatures
// takes constant time. What needs no body (the scheme's headers, their form, the timestamp)
// Provider.CheckHeaders checks before the body is read: anyone can send a delivery, and one
// that fails there costs the service no read of its body.
//
// # Standard Webhooks
//
// The scheme of https://www.standardwebhooks.com, verified by its Go library: headers
// webhook-id, webhook-timestamp (unix seconds) and webhook-signature ("v1,<base64 of the
// HMAC-SHA256 of id.timestamp.body>", several separated by spaces). A secret is "whsec_"
// and the base64 of a key of at least 16 bytes. The event id is webhook-id. The body is the
// service's own format, in the spec's envelope:
//
//	{"type": "payment.succeeded", "timestamp": "2026-03-01T12:00:00Z",
//	 "data": {"paymentId": "pay-1", "orderId": "(optional)", "amount": 1250, "currency": "EUR"}}
//	{"type": "payment.failed", "timestamp": "…",
//	 "data": {"paymentId": "pay-1", "orderId": "(optional)", "reason": "card declined"}}
//	{"type": "refund.succeeded", "timestamp": "…",
//	 "data": {"refundId": "ref-1", "paymentId": "pay-1", "orderId": "(optional)", "amount": 1250, "currency": "EUR"}}
//
// Amounts are in minor units. A failure without a reason reads as "payment failed". Any other
// type is read as Unmapped.
//
// # Stripe
//
// Header Stripe-Signature: "t=<unix seconds>,v1=<hex of the HMAC-SHA256 of t.body>", with more
// v1 signatures during Stripe's own secret rotation, and v0 ones (test mode) that are
// ignored. The HMAC key is the secret's text as it is, "whsec_" and all, as Stripe does. The
// body is a Stripe event object; its "id" (evt_…) is the event id. Read maps:
//
//   - payment_intent.succeeded: PaymentSucceeded of the payment intent (pi_…), for its
//     amount_received (or amount) and currency.
//   - payment_intent.payment_failed: PaymentFailed, with last_payment_error.message as the reason.
//   - refund.updated with status "succeeded": RefundSucceeded of the refund (re_…), for its
//     amount, of its payment_intent. Another status is Unmapped: no refund completed.
//   - charge.refunded: RefundSucceeded of the charge's payment_intent. When the charge lists
//     its refunds (refunds.data, newest first), the newest one is the refund, for its own
//     amount; a pending one is Unmapped. Without the list, as charges of API versions since
//     2022-11-15 come, the refund id is the charge's (ch_…) and the amount its
//     amount_refunded, the total refunded: right for one full refund, not for a second partial
//     one, for which subscribe to refund.updated instead.
//
// Amounts are in minor units; currencies are upper-cased. The order id is the object's
// metadata order_id (or orderId). Any other type is read as Unmapped.
package providers
