package tests

import (
	"net/url"
	"testing"
	"time"
)

// The sales report sums, per day and currency, the payments confirmed, the duplicate charges
// (apart from the amount paid) and the refunds completed, from orders made through the API.
func TestSalesReport(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	a, _ := s.create(t, "sales-a", "c-sales-a")
	s.pay(t, a, "pay-sales-a")
	b, _ := s.create(t, "sales-b", "c-sales-b")
	s.pay(t, b, "pay-sales-b")
	// A second capture of a: recorded as a duplicate charge, refused as the order's payment.
	dup := s.do(t, "POST", "/v1/orders/"+a+"/payments/pay-sales-a2/confirm", "sales-a-dup", map[string]any{"amount": orderTotal})
	checkProblem(t, dup, 422, "command-rejected")
	s.command(t, b, "/refunds", "sales-b-refund", map[string]any{"refundId": "r-sales", "amount": 500})
	// A refund requested but not completed counts nothing yet.
	s.command(t, a, "/refunds", "sales-a-refund", map[string]any{"refundId": "r-sales-a", "amount": 300})
	s.command(t, b, "/refunds/r-sales/complete", "sales-b-complete", map[string]any{})
	s.create(t, "sales-c", "c-sales-c") // created, never paid: counts nothing

	// Around midnight UTC the events may fall on two days: report three and add them up.
	now := time.Now().UTC()
	q := url.Values{"from": {now.AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {now.AddDate(0, 0, 1).Format(time.DateOnly)}, "currency": {"EUR"}}
	r := s.do(t, "GET", "/v1/reports/sales?"+q.Encode(), "", nil)
	wantStatus(t, r, 200)
	sums := map[string]int64{}
	for _, d := range r.json["days"].([]any) {
		day := d.(map[string]any)
		if day["currency"] != "EUR" {
			t.Errorf("a row in %v in a report of EUR", day["currency"])
		}
		for _, k := range []string{"ordersPaid", "amountPaid", "duplicateCharges", "duplicateCharged", "refunded", "net"} {
			sums[k] += jsonInt(day[k])
		}
	}
	want := map[string]int64{"ordersPaid": 2, "amountPaid": 2 * orderTotal, "duplicateCharges": 1, "duplicateCharged": orderTotal,
		"refunded": 500, "net": 2*orderTotal - 500}
	for k, v := range want {
		if sums[k] != v {
			t.Errorf("%s = %d, want %d (report %s)", k, sums[k], v, r.body)
		}
	}

	q.Set("currency", "USD")
	if r := s.do(t, "GET", "/v1/reports/sales?"+q.Encode(), "", nil); len(r.json["days"].([]any)) != 0 {
		t.Errorf("USD report: %s, want no days", r.body)
	}
}

// A sales report's query is checked before the read model is read.
func TestSalesReportRefusesBadQueries(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	for _, query := range []string{
		"",
		"from=2026-03-01",
		"to=2026-03-01",
		"from=2026-3-1&to=2026-03-02",
		"from=2026-03-01&to=yesterday",
		"from=2026-03-02&to=2026-03-01",
		"from=2025-01-01&to=2026-03-01",
		"from=2026-03-01&to=2026-03-02&currency=eur",
		"from=2026-03-01&to=2026-03-02&currency=EURO",
		"from=2026-03-01&to=2026-03-02&limit=0",
		"from=2026-03-01&to=2026-03-02&limit=1001",
		"from=2026-03-01&to=2026-03-02&cursor=nonsense",
	} {
		checkProblem(t, s.doInvalid(t, "GET", "/v1/reports/sales?"+query, "", nil), 400, "malformed-request")
	}
	wantStatus(t, s.do(t, "GET", "/v1/reports/sales?from=2025-03-01&to=2026-03-01", "", nil), 200) // 366 days
}
