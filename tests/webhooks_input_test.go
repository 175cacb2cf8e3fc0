package tests

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Registrations that cannot be used are refused with a 4xx problem: URLs that are not https or
// name addresses that are not globally reachable, unknown event types, a missing key.
func TestWebhookRegistrationsRefused(t *testing.T) {
	t.Parallel()
	// Without --webhooks-allow-private.
	s := startServer(t, "", "--keys-file", accessKeysFile(t),
		"--webhooks-secret-key-file", filepath.Join(t.TempDir(), "webhooks.key"), "--webhooks-generate-key")
	for i, c := range []struct {
		url    string
		events []string
		code   string
	}{
		{"http://shop.example/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://127.0.0.1/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://[::1]:8443/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://10.1.2.3/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://192.168.0.10/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://169.254.169.254/latest/meta-data", []string{"*"}, "webhook-url-refused"},
		// Special-purpose ranges, and IPv6 forms of refused IPv4 addresses.
		{"https://0.1.2.3/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://198.18.0.1/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://192.0.0.8/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://240.0.0.1/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://255.255.255.255/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://[64:ff9b::a00:1]/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://[2002:7f00:1::]/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://[::127.0.0.1]/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://[fec0::1]/hooks", []string{"*"}, "webhook-url-refused"},
		{"https://user:pw@203.0.113.9/hooks", []string{"*"}, "webhook-url-refused"},
		{"/relative", []string{"*"}, "webhook-url-refused"},
		{"https://203.0.113.9/hooks", []string{"order.teleported"}, "webhook-endpoint-invalid"},
		{"https://203.0.113.9/hooks", []string{}, "webhook-endpoint-invalid"},
	} {
		// Unknown event types are outside the document's enum: sent as invalid requests.
		r := s.doInvalid(t, "POST", "/v1/webhook-endpoints", fmt.Sprintf("bad-%d", i), map[string]any{"url": c.url, "events": c.events}, alice...)
		checkProblem(t, r, 422, c.code)
	}
	r := s.doInvalid(t, "POST", "/v1/webhook-endpoints", "", map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}}, alice...)
	checkProblem(t, r, 400, "idempotency-key-missing")
	r = s.doInvalid(t, "POST", "/v1/webhook-endpoints", "k", map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}, "colour": "red"}, alice...)
	checkProblem(t, r, 400, "malformed-request")
	r = s.as(t, audrey, "POST", "/v1/webhook-endpoints", "k", map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}})
	checkProblem(t, r, 403, "forbidden")
}

// A registration is replayed for its key, refused for the key with another body; a client
// sees only its endpoints, an admin all; a client has at most 1,000 (one more is 422).
func TestWebhookEndpointsPerClient(t *testing.T) {
	t.Parallel()
	// The bound is the flag's (1,000 by default); a smaller one shows it as well.
	const most = 40
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t), "--webhooks-max-endpoints", fmt.Sprint(most))...)
	rec := newReceiver(t)
	first := s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", "ep-0", map[string]any{"url": rec.url, "events": []string{"order.paid"}})
	again := s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", "ep-0", map[string]any{"url": rec.url, "events": []string{"order.paid"}})
	if again.replayed() != "true" || again.str("id") != first.str("id") || again.str("secret") != first.str("secret") {
		t.Errorf("replay %s, first %s", again.body, first.body)
	}
	checkProblem(t, s.as(t, alice, "POST", "/v1/webhook-endpoints", "ep-0", map[string]any{"url": rec.url, "events": []string{"*"}}), 422, "idempotency-key-reused")
	id := first.str("id")
	checkProblem(t, s.as(t, bob, "GET", "/v1/webhook-endpoints/"+id, "", nil), 404, "not-found")
	checkProblem(t, s.as(t, bob, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rot-1", nil), 404, "not-found")
	rotated := s.ok(t, alice, 200, "POST", "/v1/webhook-endpoints/"+id+"/rotate-secret", "rot-1", nil)
	if rotated.str("secret") == first.str("secret") {
		t.Error("the rotation kept the secret")
	}

	// Up to the most, concurrently: then 422.
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 1; i < most; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", fmt.Sprintf("ep-%d", i), map[string]any{"url": rec.url, "events": []string{"*"}})
		})
	}
	wg.Wait()
	checkProblem(t, s.as(t, alice, "POST", "/v1/webhook-endpoints", "ep-last", map[string]any{"url": rec.url, "events": []string{"*"}}), 422, "webhook-endpoint-limit")
	s.ok(t, bob, 201, "POST", "/v1/webhook-endpoints", "ep-last", map[string]any{"url": rec.url, "events": []string{"*"}})
	if n := len(s.ok(t, alice, 200, "GET", "/v1/webhook-endpoints", "", nil).json["endpoints"].([]any)); n != most {
		t.Errorf("alice lists %d endpoints", n)
	}
	if n := len(s.ok(t, adam, 200, "GET", "/v1/webhook-endpoints", "", nil).json["endpoints"].([]any)); n != most+1 {
		t.Errorf("an admin lists %d endpoints", n)
	}
	s.ok(t, alice, 204, "DELETE", "/v1/webhook-endpoints/"+id, "", nil)
	s.ok(t, alice, 204, "DELETE", "/v1/webhook-endpoints/"+id, "", nil)
	s.ok(t, alice, 201, "POST", "/v1/webhook-endpoints", "ep-after", map[string]any{"url": rec.url, "events": []string{"*"}})
}

// A webhook endpoint's description is text as every free-text field takes it: printable, on
// one line; control, format and bidi characters, separators and noncharacters are refused.
func TestWebhookDescriptionIsText(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", webhookArgs(t, "--keys-file", accessKeysFile(t))...)
	rec := newReceiver(t)
	for i, d := range []string{"a\x00b", "a\tb", "a\u202eb", "\ufeffa", "a\u2028b", "a\ufffeb", " a"} {
		r := s.doInvalid(t, "POST", "/v1/webhook-endpoints", fmt.Sprint("desc-", i), map[string]any{"url": rec.url, "events": []string{"*"}, "description": d}, alice...)
		checkProblem(t, r, http.StatusBadRequest, "malformed-request")
	}
	s.ok(t, alice, http.StatusCreated, "POST", "/v1/webhook-endpoints", "desc-ok", map[string]any{"url": rec.url, "events": []string{"*"}, "description": "Shop – orders, ünïcode"})
}

// In development mode on the embedded store, webhooks work out of the box: without a key the
// server makes one in its data directory (owner-only), and keeps it across restarts. With API
// keys and no webhook key, webhooks are off (503), as an operator must choose where the key lives.
func TestWebhooksWorkOutOfTheBoxInDevelopmentMode(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "--webhooks-allow-private")
	body := map[string]any{"url": "https://127.0.0.1:9/hooks", "events": []string{"*"}}
	first := s.do(t, "POST", "/v1/webhook-endpoints", "dev-hook", body)
	wantStatus(t, first, http.StatusCreated)
	info, err := os.Stat(filepath.Join(s.dir, "webhooks.key"))
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("the key file's mode is %v, want 0600", mode)
	}
	s.restart(t)
	again := s.do(t, "POST", "/v1/webhook-endpoints", "dev-hook", body)
	if again.status != http.StatusCreated || again.str("secret") != first.str("secret") {
		t.Errorf("the registration's retry after a restart: %s; want the first secret, opened by the same key", again.body)
	}

	keyed := startServer(t, "", "--keys-file", accessKeysFile(t), "--webhooks-allow-private")
	checkProblem(t, keyed.as(t, alice, "POST", "/v1/webhook-endpoints", "no-key", body), http.StatusServiceUnavailable, "unavailable")
}
