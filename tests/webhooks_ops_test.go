package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// An endpoint that keeps failing is disabled and says why; enabling it resumes where it
// stopped. After a secret's rotation, deliveries verify with the old secret and with the new one.
func TestWebhookEndpointDisabledAndRotated(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t), "--webhooks-disable-after", "1s",
		"--webhooks-retry-schedule", "0s,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms,200ms")...)
	rec := newReceiver(t)
	id, secret := s.register(t, alice, "failing", rec.url)
	rec.setSecrets(secret)
	rec.setAnswer(func(delivery, int) (int, time.Duration) { return http.StatusInternalServerError, 0 })
	order, n := s.lifecycle(t, alice, "disabled", "c-disabled")
	waitFor(t, 20*time.Second, "the endpoint disabled", func() bool {
		return s.ok(t, alice, 200, "GET", "/v1/webhook-endpoints/"+id, "", nil).str("status") == "disabled"
	})
	if why := s.ok(t, alice, 200, "GET", "/v1/webhook-endpoints/"+id, "", nil).str("disabledReason"); !strings.Contains(why, "failing since") {
		t.Errorf("disabledReason %q", why)
	}

	// Rotated while disabled: both secrets sign; a receiver that knows only one verifies.
	rotated := s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-1", nil)
	if again := s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-1", nil); again.str("secret") != rotated.str("secret") || again.replayed() != "true" {
		t.Errorf("the rotation's retry: %s", again.body)
	}
	rec.setSecrets(rotated.str("secret"))
	rec.setAnswer(func(delivery, int) (int, time.Duration) { return 200, 0 })
	s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/enable", "", nil)
	waitFor(t, 20*time.Second, "deliveries resumed", func() bool { return rec.received() > 0 })
	rec.setSecrets(secret)
	second, _ := s.lifecycle(t, alice, "after-rotation", "c-after")
	waitFor(t, 20*time.Second, "every event delivered", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.perOrder[second]) == 5
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, bad := range rec.invalid {
		t.Error(bad)
	}
	if got := rec.perOrder[order]; len(got) > n {
		t.Errorf("order %s: %v", order, got)
	}
}
