package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/acme/orders/webhooks"
)

// A webhook change that gave up because its streams kept changing under it changed nothing:
// it is a passing condition, answered 503 unavailable (with Retry-After, as every 5xx), never
// a 500.
func TestContendedWebhookChangeIsUnavailable(t *testing.T) {
	p, ok := webhookProblem(fmt.Errorf("register webhook endpoint e: %w", webhooks.ErrContended))
	if !ok || p.Status != http.StatusServiceUnavailable || p.Code() != "unavailable" {
		t.Errorf("problem %+v, %v; want 503 unavailable", p, ok)
	}
}
