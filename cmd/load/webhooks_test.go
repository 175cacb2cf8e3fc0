package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The receiver takes a repeat with the same id as at least once, and counts an order's event
// received before an earlier one, another id for a received event, a bad signature, and the
// events never received.
func TestHookReceiverChecksEveryDelivery(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a secret of twenty-four b"))
	rc := &hookReceiver{}
	if i, err := rc.add(secret); i != 0 || err != nil {
		t.Fatalf("add: %d %v", i, err)
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	signer, _ := standardwebhooks.NewWebhook(secret)
	recorded := time.Now().Add(-50 * time.Millisecond)
	send := func(id, order string, rev int, sign bool) {
		t.Helper()
		body := fmt.Appendf(nil, `{"id":%q,"type":"order.created","createdAt":%q,"orderId":%q,"revision":%d,"data":{}}`,
			id, recorded.Format(time.RFC3339Nano), order, rev)
		now := time.Now()
		sig, _ := signer.Sign(id, now, body)
		if !sign {
			sig = "v1,AAAA"
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hook/0", bytes.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
		req.Header.Set("webhook-signature", sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	send("a", "o1", 0, true)
	send("a", "o1", 0, true) // at least once
	send("c", "o1", 2, true) // before @1
	send("b", "o1", 1, true)
	send("x", "o1", 1, true) // another id for o1@1
	send("d", "o2", 0, false)
	send("e", "o2", 0, true)

	h := rc.summary(recorded.Add(-time.Second), time.Now().Add(time.Second))
	if h.Requests != 7 || h.Events != 4 || h.OutOfOrder != 1 || h.IDChanged != 1 || h.BadSignatures != 1 || h.ok() {
		t.Errorf("figures %+v", h)
	}
	if h.Samples != 4 || h.P99 < 50*time.Millisecond || h.Max < h.P50 {
		t.Errorf("lag: %d samples, p50 %v, p99 %v, max %v", h.Samples, h.P50, h.P99, h.Max)
	}
	if n := rc.missing(map[string]int{"o1": 3, "o2": 2}); n != 1 {
		t.Errorf("missing %d, want 1 (o2@1)", n)
	}
}

func TestWebhooksOptionIsBounded(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"run", "--url", "http://127.0.0.1:1", "--webhooks", "1001"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--webhooks 1001") {
		t.Errorf("run --webhooks 1001: %v", err)
	}
}
