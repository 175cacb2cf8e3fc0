package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/lease"
)

// The NATS flags come from the environment as the others do, and nothing of NATS runs
// without a URL.
func TestNatsFlags(t *testing.T) {
	c, err := parseCLI(t, map[string]string{"API_NATS_URL": "nats://u:pw@127.0.0.1:4222", "API_NATS_MAX_ACK_PENDING": "7"}, "serve")
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Serve.Nats; f.NatsURL != "nats://u:pw@127.0.0.1:4222" || f.NatsMaxAckPending != 7 || f.NatsEventsPrefix != "orders.events" {
		t.Errorf("flags from the environment: %+v", f)
	}
	off, err := natsFlags{}.open(context.Background(), nil, nil, nil, lease.Terms{}, time.Second, nil, nil)
	if off != nil || err != nil {
		t.Errorf("without --nats-url: %v, %v; want nothing", off, err)
	}
	_, err = natsFlags{NatsURL: "nats://x", NatsAckWait: time.Second, NatsMaxAckPending: 1, NatsPublishBatch: 1, NatsLease: time.Second}.open(context.Background(), nil, nil, nil, lease.Terms{}, 2*time.Second, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "--key-wait") {
		t.Errorf("an ack wait shorter than the key wait: %v", err)
	}
	_, err = natsFlags{NatsURL: "nats://x", NatsAckWait: 3 * time.Second, NatsMaxAckPending: 1, NatsPublishBatch: 1, NatsLease: time.Minute, NatsDuplicateWindow: time.Minute}.open(context.Background(), nil, nil, nil, lease.Terms{}, 2*time.Second, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "--nats-duplicate-window") {
		t.Errorf("a duplicate window shorter than two leases: %v", err)
	}
}

// The passwords and tokens of NATS URLs are masked wherever a message quotes them.
func TestNatsCredentialsRedacted(t *testing.T) {
	f := natsFlags{NatsURL: "nats://alice:s3cr%2Ft@a:4222, nats://tok3n@b:4222,nats://c:4222"}
	msg := f.redact("dial nats://alice:s3cr%2Ft@a:4222 (s3cr/t) and nats://tok3n@b:4222 failed")
	if strings.Contains(msg, "s3cr") || strings.Contains(msg, "tok3n") {
		t.Errorf("not redacted: %s", msg)
	}
}
