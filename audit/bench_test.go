package audit_test

import (
	"context"
	"testing"

	"github.com/acme/orders/audit"
	"github.com/acme/orders/command/commandtest"
	"github.com/acme/orders/eventstore/sqlite"
)

// benchOrders orders of 10 chained events each make the verifier's million-event log.
const benchOrders = 100_000

// BenchmarkVerify verifies a clean log of 1,000,000 chained order events.
func BenchmarkVerify(b *testing.B) {
	s, err := sqlite.Open(commandtest.Log(b, benchOrders), sqlite.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	events := uint64(0)
	for b.Loop() {
		rep, err := (&audit.Verifier{Feed: s}).Verify(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Findings) != 0 || rep.Events != benchOrders*10 {
			b.Fatalf("%d events, %d findings (first %v)", rep.Events, len(rep.Findings), rep.Findings)
		}
		events += rep.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
