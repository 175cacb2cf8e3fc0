package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Anyone can send a delivery to the providers' endpoint, which reads its body before it can
// verify it. Senders that loop slow 1 MiB bodies at it, without signature headers or with
// headers in the form and time of the provider's, never make a client's command wait for room
// to read its body: every create of some 39 KB (past the free first 16 KiB of each body)
// succeeds while they send, and a delivery of the provider is applied.
func TestProviderDeliveriesFromAnyoneLeaveCommandsTheirRoom(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--keys-file", accessKeysFile(t), "--payment-providers", providersFile(t, psp),
		"--body-memory", "1", "--provider-body-memory", "1")
	ctx, stop := context.WithCancel(context.Background())
	var sent atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		header := ""
		if i%2 == 1 {
			_, h := signedDelivery(t, psp, succeeded(fmt.Sprint("evt-hostile-", i), "pay-hostile", orderTotal), time.Now())
			for j := 0; j < len(h); j += 2 {
				header += h[j] + ": " + h[j+1] + "\r\n"
			}
		}
		wg.Go(func() { sendSlowBodies(ctx, t, s, header, &sent) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()
	// Four times the budget sent: without a budget of their own, they hold all of it.
	waitFor(t, 30*time.Second, "the slow senders' first bodies", func() bool { return sent.Load() >= 4<<20 })

	id := s.payingOrder(t, "pay-amid-senders")
	body := largeOrder()
	for i := range 20 {
		r := s.as(t, alice, "POST", "/v1/orders", fmt.Sprint("create-amid-senders-", i), body)
		wantStatus(t, r, http.StatusCreated)
	}
	s.deliverOK(t, psp, succeeded("evt-amid-senders", "pay-amid-senders", orderTotal), "applied")
	if o := s.ok(t, alice, http.StatusOK, "GET", "/v1/orders/"+id, "", nil); o.str("status") != "paid" {
		t.Errorf("after the provider's delivery: %v; want paid", o)
	}
}

// sendSlowBodies sends s deliveries of 1 MiB bodies with the header lines header, 16 KiB every
// 50 ms, one after the other until ctx ends, adding the bytes sent to sent. What the server
// answers is not its business: a sender that nobody authenticated does not read answers.
func sendSlowBodies(ctx context.Context, t *testing.T, s *server, header string, sent *atomic.Int64) {
	u, err := url.Parse(s.url(""))
	if err != nil {
		t.Error(err)
		return
	}
	chunk := strings.Repeat("x", 16<<10)
	for ctx.Err() == nil {
		conn, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		fmt.Fprintf(conn, "POST /v1/provider-events/psp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", u.Host, 1<<20, header)
		for n := 0; n < 1<<20 && ctx.Err() == nil; n += len(chunk) {
			conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte(chunk)); err != nil {
				break
			}
			sent.Add(int64(len(chunk)))
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		conn.Close()
	}
}

// largeOrder is a create of 100 lines, each with a long SKU and name: some 39 KB.
func largeOrder() map[string]any {
	var lines []map[string]any
	for i := range 100 {
		lines = append(lines, map[string]any{"sku": fmt.Sprintf("%03d-%s", i, strings.Repeat("s", 124)), "quantity": 1,
			"unitPrice": 100, "name": strings.Repeat("n", 200)})
	}
	return map[string]any{"customerId": "c-large", "currency": "EUR", "lines": lines}
}
