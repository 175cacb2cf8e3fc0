package command

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// A key's needle says "may name" of every metadata that names the principal's key, in the
// layout written now and in one without a hash, whatever the principal and key hold (quotes,
// HTML, non-ASCII, a key that is the start of another); of metadata in the layout written now
// with a principal, it says "cannot" of every other principal's or key's.
func TestKeyNeedle(t *testing.T) {
	text := rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'k', '-', '1', '"', '\\', '<', '&', 'é', ','}), 0, 8, -1)
	rapid.Check(t, func(t *rapid.T) {
		principal, key := text.Draw(t, "principal"), rapid.StringN(1, 8, -1).Draw(t, "key")
		otherPrincipal, otherKey := text.Draw(t, "other principal"), text.Draw(t, "other key")
		n := newKeyNeedle(principal, key)
		for _, md := range []Metadata{
			{Principal: otherPrincipal, IdempotencyKey: otherKey, Command: "c"},
			{Principal: principal, IdempotencyKey: otherKey, Fingerprint: "f", Command: "c"},
			{Principal: otherPrincipal, IdempotencyKey: key, Command: "c"},
			{Principal: principal, IdempotencyKey: key, Fingerprint: "f", CorrelationID: "r", Command: "c"},
		} {
			names := md.Principal == principal && md.IdempotencyKey == key
			chained, _, err := chained(md, Genesis, "order-1", 0, "t", []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			// Without a principal, the layout is another: the key is searched for.
			if got := n.mayName(chained); got != names && (md.Principal != "" || !got) {
				t.Fatalf("needle of %q, %q on %s: %v, want %v", principal, key, chained, got, names)
			}
			plain, _ := json.Marshal(md)
			if names && !n.mayName(plain) {
				t.Fatalf("needle of %q, %q on %s (no hash): cannot name it", principal, key, plain)
			}
		}
	})
}
