package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Two API nodes on one shared store deliver for one endpoint: one node at a time holds its
// lease, so no delivery is in flight from both at once; when the holder dies the other takes
// over within the lease and every event arrives.
func TestWebhooksTwoNodesOneLease(t *testing.T) {
	t.Parallel()
	onSharedStores(t, testWebhooksTwoNodesOneLease)
}

func testWebhooksTwoNodesOneLease(t *testing.T, store func(...string) []string) {
	key := filepath.Join(t.TempDir(), "webhooks.key") // both nodes seal and sign with one key
	args := append(store("--keys-file", accessKeysFile(t)),
		"--webhooks-secret-key-file", key, "--webhooks-generate-key", "--webhooks-allow-private",
		"--webhooks-retry-schedule", "0s,100ms,200ms,500ms,1s,2s,5s", "--webhooks-timeout", "500ms", "--webhooks-lease", "3s")
	a := startServer(t, "", args...)
	b := startServer(t, "", args...)
	rec := newReceiver(t)
	rec.setAnswer(func(delivery, int) (int, time.Duration) { return 200, 20 * time.Millisecond })
	_, secret := a.register(t, alice, "two-nodes", rec.url)
	rec.setSecrets(secret)

	want := map[string]int{}
	for i := range 6 {
		node := []*server{a, b}[i%2]
		id, n := node.lifecycle(t, alice, fmt.Sprintf("two-%d", i), fmt.Sprintf("c-two-%d", i))
		want[id] = n
	}
	waitFor(t, 30*time.Second, "the first events delivered", func() bool { return rec.received() == 30 })

	holder, other := a, b
	if !strings.Contains(a.current().stderr.String(), `"event":"lease acquired"`) {
		holder, other = b, a
	}
	holder.kill(t)
	t.Logf("killed the lease holder")
	for i := range 4 {
		id, n := other.lifecycle(t, alice, fmt.Sprintf("after-%d", i), fmt.Sprintf("c-after-%d", i))
		want[id] = n
	}
	waitFor(t, 30*time.Second, "every event delivered after the takeover", func() bool { return rec.received() == 50 })
	if !strings.Contains(other.current().stderr.String(), `"event":"lease acquired"`) {
		t.Error("the surviving node did not log taking the lease")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, id := range rec.overlaps {
		t.Errorf("delivery %s was in flight twice at once", id)
	}
	for _, bad := range rec.invalid {
		t.Error(bad)
	}
	for id, n := range want {
		if got := rec.perOrder[id]; len(got) != n {
			t.Errorf("order %s: revisions %v acknowledged, want %d", id, got, n)
		}
	}
}

// Identical registrations with one key, sent at once to several API nodes on one shared store,
// go through the key as one: one endpoint, and every answer shows its one secret.
func TestRegistrationsAtOnceOnSeveralNodes(t *testing.T) {
	t.Parallel()
	onSharedStores(t, func(t *testing.T, store func(...string) []string) {
		key := filepath.Join(t.TempDir(), "webhooks.key") // the nodes seal with one key
		nodes := startNodes(t, append(store("--keys-file", accessKeysFile(t)),
			"--webhooks-secret-key-file", key, "--webhooks-generate-key", "--webhooks-allow-private"))
		req := request{method: "POST", path: "/v1/webhook-endpoints", key: "at-once", header: alice,
			body: map[string]any{"url": "https://203.0.113.9/hooks", "events": []string{"*"}}}
		answers := make([]*response, 12)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				r, _, err := nodes[i%len(nodes)].sendSettled(t, req, time.Now().Add(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				answers[i] = r
			})
		}
		wg.Wait()
		for i, r := range answers {
			if r == nil {
				continue
			}
			if r.status != 201 || r.str("id") != answers[0].str("id") || r.str("secret") != answers[0].str("secret") || r.str("secret") == "" {
				t.Errorf("answer %d: %v; want the first's endpoint and secret", i, r)
			}
		}
		if n := len(nodes[0].ok(t, alice, 200, "GET", "/v1/webhook-endpoints", "", nil).json["endpoints"].([]any)); n != 1 {
			t.Errorf("%d endpoints registered; want 1", n)
		}
	})
}
