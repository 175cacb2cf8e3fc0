package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acme/orders/idempotency"
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

// A signing secret is shown to its owner in the answer that drew it and to that request's
// retries, and never again once its endpoint is deleted, it is rotated away or the key is
// older than the key TTL; an admin sees a client's endpoints but never learns their secrets.
func TestWebhookSecretsAreShownOnce(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t), "--key-ttl", ttl.String())...)
	body := map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}}
	register := func(key string) *response {
		return s.as(t, alice, "POST", "/v1/webhook-endpoints", key, body)
	}
	rotate := func(caller []string, id, key string) *response {
		return s.as(t, caller, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", key, nil)
	}
	withdrawn := func(what string, r *response) {
		t.Helper()
		checkProblem(t, r, 422, "webhook-secret-withdrawn")
		if strings.Contains(string(r.body), "whsec_") {
			t.Errorf("%s: the answer shows a secret: %s", what, r.body)
		}
	}

	id, first := s.register(t, alice, "shown-once", "https://203.0.113.9/hooks")
	if again := s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", "shown-once", body); again.str("secret") != first || again.replayed() != "true" {
		t.Errorf("the registration's retry: %s", again.body)
	}
	rotated := s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-1", nil).str("secret")
	if again := s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-1", nil); again.str("secret") != rotated {
		t.Errorf("the rotation's retry: %s", again.body)
	}
	withdrawn("the registration's retry after a rotation", register("shown-once"))
	s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-2", nil)
	withdrawn("a rotation's retry after another rotation", rotate(alice, id, "rotate-1"))

	// An admin reads the endpoint, but may not rotate its secret: it is alice's alone.
	r := rotate(adam, id, "admin-rotate")
	checkProblem(t, r, 403, "forbidden")
	for _, r := range []*response{r, s.ok(t, adam, 200, "GET", "/v1/webhook-endpoints/"+id, "", nil), s.ok(t, adam, 200, "GET", "/v1/webhook-endpoints", "", nil)} {
		if strings.Contains(string(r.body), "whsec_") {
			t.Errorf("an admin's answer shows a secret: %s", r.body)
		}
	}

	deleted, _ := s.register(t, alice, "deleted", "https://203.0.113.9/hooks")
	s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+deleted+"/rotate-secret", "rotate-deleted", nil)
	s.ok(t, alice, 204, "DELETE", "/v1/webhook-endpoints/"+deleted, "", nil)
	withdrawn("the registration's retry after deletion", s.as(t, alice, "POST", "/v1/webhook-endpoints", "deleted", body))
	checkProblem(t, rotate(alice, deleted, "rotate-deleted"), 404, "not-found")

	// Past the key TTL, neither a registration's nor a rotation's retry shows its secret.
	s.register(t, alice, "aged", "https://203.0.113.9/hooks")
	s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rotate-aged", nil)
	time.Sleep(ttl + 500*time.Millisecond)
	withdrawn("the registration's retry past the key TTL", register("aged"))
	withdrawn("a rotation's retry past the key TTL", rotate(alice, id, "rotate-aged"))
}

// A registration and a rotation are keyed writes of the one pipeline: each leaves one event in
// its key's stream, its claim and answer together, which holds no secret; their retries, to a
// process that remembers nothing, show the secrets their first answers drew.
func TestEndpointChangesRecordTheirKeysInOneEvent(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t))...)
	registered, secret := s.register(t, alice, "registration", "https://203.0.113.9/hooks")
	rotatedID, _ := s.register(t, alice, "rotated", "https://203.0.113.9/other")
	rotation := "/v1/webhook-endpoints/" + rotatedID + "/rotate-secret"
	rotated := s.ok(t, alice, 200, "POST", rotation, "rotation", nil).str("secret")
	s.current().stop(t)
	for key, shown := range map[string]string{"registration": secret, "rotation": rotated} {
		events := keyEvents(t, s.dir, "alice", key)
		if len(events) != 1 || events[0].Type != idempotency.TypeRecorded {
			t.Fatalf("%s: the key's stream holds %d events; want one %s", key, len(events), idempotency.TypeRecorded)
		}
		if data := string(events[0].Data); strings.Contains(data, strings.TrimPrefix(shown, "whsec_")) || strings.Contains(data, "whsec_") {
			t.Errorf("%s: the key's event holds a secret: %s", key, data)
		}
	}
	s.start(t)
	body := map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}}
	if again := s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", "registration", body); again.str("secret") != secret ||
		again.str("id") != registered || again.replayed() != "true" {
		t.Errorf("the registration's retry: %s", again.body)
	}
	if again := s.ok(t, alice, 200, "POST", rotation, "rotation", nil); again.str("secret") != rotated || again.replayed() != "true" {
		t.Errorf("the rotation's retry: %s", again.body)
	}
	// The keys read as any key does, naming their endpoints rather than an order.
	for key, id := range map[string]string{"registration": registered, "rotation": rotatedID} {
		k := s.ok(t, alice, 200, "GET", "/v1/idempotency-keys/"+key, "", nil)
		if k.str("endpointId") != id || k.json["orderId"] != nil || k.json["status"] == nil {
			t.Errorf("key %s: %s; want endpoint %s, completed", key, k.body, id)
		}
	}
}
