package providers_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acme/orders/providers"
)

// Secrets of the tests. Each is distinctive, so that a test can tell it is not printed.
var (
	swSecret     = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-key-one-32-bytes-long!!"))
	swSecret2    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-key-two-32-bytes-long!!"))
	stripeSecret = "whsec_stripeSecretOne0123456789"
	stripeNext   = "whsec_stripeSecretTwo0123456789"
)

func standardProvider(secrets ...string) providers.Provider {
	return provider(providers.StandardWebhooks, secrets...)
}

func stripeProvider(secrets ...string) providers.Provider {
	return provider(providers.Stripe, secrets...)
}

func provider(scheme providers.Scheme, secrets ...string) providers.Provider {
	p := providers.Provider{Name: string(scheme) + "-test", Principal: "shop-1", Scheme: scheme}
	for _, s := range secrets {
		p.Secrets = append(p.Secrets, providers.Secret(s))
	}
	return p
}

// file is a providers file of ps, as an operator writes it.
func file(t *testing.T, ps ...map[string]any) []byte {
	t.Helper()
	data, err := json.Marshal(map[string]any{"providers": ps})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func entry(name, scheme string, secrets ...string) map[string]any {
	return map[string]any{"name": name, "principal": "shop-1", "scheme": scheme, "secrets": secrets}
}

func TestParseValidFile(t *testing.T) {
	set, err := providers.Parse(file(t,
		entry("stripe-eu", "stripe", stripeSecret, stripeNext),
		entry("acme-pay", "standard-webhooks", swSecret),
	))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set.Names(), []string{"acme-pay", "stripe-eu"}; !slices.Equal(got, want) || set.Len() != 2 {
		t.Errorf("Names() %v, Len() %d; want %v, 2", got, set.Len(), want)
	}
	p, ok := set.Get("stripe-eu")
	if !ok || p.Principal != "shop-1" || p.Scheme != providers.Stripe ||
		!slices.Equal(p.Secrets, []providers.Secret{providers.Secret(stripeSecret), providers.Secret(stripeNext)}) {
		t.Errorf("Get(stripe-eu) = %v, %v; want the provider with both secrets", p, ok)
	}
	// The set is immutable: what Get returns is a copy.
	p.Secrets[0] = "whsec_changed-by-a-caller"
	if again, _ := set.Get("stripe-eu"); string(again.Secrets[0]) != stripeSecret {
		t.Error("changing the secrets Get returned changed the set's")
	}
	if _, ok := set.Get("nope"); ok {
		t.Error("Get(nope) found a provider")
	}
}

func TestParseInvalidFiles(t *testing.T) {
	const marker = "whsec_SeCrEt0123456789" // a valid Stripe secret; some cases put it in an invalid place
	many := make([]map[string]any, providers.MaxProviders+1)
	for i := range many {
		many[i] = entry(fmt.Sprintf("p%d", i), "stripe", marker)
	}
	withPrincipal := func(m map[string]any, principal string) map[string]any { m["principal"] = principal; return m }
	withField := func(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte(`{"providers":[{"name":"a","secrets":["` + marker + `` + "\x01" + `"]}]}`), "not valid JSON"},
		{"truncated", []byte(`{"providers":[{"secrets":["` + marker), "not valid JSON"},
		{"empty", nil, "empty"},
		{"trailing data", append(file(t, entry("a", "stripe", marker)), `{}`...), "more after the JSON object"},
		{"no providers", []byte(`{"providers":[]}`), "no providers"},
		{"unknown top-level field", []byte(`{"provider":[]}`), `unknown field "provider"`},
		{"unknown field", file(t, withField(entry("a", "stripe", marker), "secret", marker)), `unknown field "secret"`},
		{"secret not a string", file(t, withField(entry("a", "stripe"), "secrets", []any{12345})), "secrets"},
		{"bad name: upper case", file(t, entry("Stripe", "stripe", marker)), `provider 0 ("Stripe"): name "Stripe": only a-z, 0-9 and -`},
		{"bad name: empty", file(t, entry("", "stripe", marker)), `provider 0 (""): name ""`},
		{"bad name: leading dash", file(t, entry("-a", "stripe", marker)), `name "-a"`},
		{"bad name: slash", file(t, entry("a/b", "stripe", marker)), `name "a/b"`},
		{"bad name: too long", file(t, entry(strings.Repeat("a", 65), "stripe", marker)), "1 to 64 characters"},
		{"bad principal", file(t, withPrincipal(entry("a", "stripe", marker), "shop 1")), `principal "shop 1"`},
		{"no principal", file(t, withPrincipal(entry("a", "stripe", marker), "")), `principal ""`},
		{"no secrets", file(t, entry("a", "stripe")), "secrets: 0 given"},
		{"three secrets", file(t, entry("a", "stripe", marker, marker+"2", marker+"3")), "secrets: 3 given"},
		{"stripe secret without prefix", file(t, entry("a", "stripe", "sk_"+marker)), "secret 1: does not start with whsec_"},
		{"stripe secret too short", file(t, entry("a", "stripe", marker, "whsec_SeCrEt")), "secret 2: shorter than 16"},
		{"standard secret not base64", file(t, entry("a", "standard-webhooks", marker+"!!")), "secret 1: is not whsec_ followed by base64"},
		{"standard secret too short", file(t, entry("a", "standard-webhooks", "whsec_"+base64.StdEncoding.EncodeToString([]byte("SeCrEt-15-bytes")))), "secret 1: gives a key of 15 bytes; at least 16"},
		{"standard secret without prefix", file(t, entry("a", "standard-webhooks", strings.TrimPrefix(swSecret, "whsec_"))), "does not start with whsec_"},
		{"unknown scheme", file(t, entry("a", "paypal", marker)), `scheme "paypal" is not one of standard-webhooks, stripe`},
		{"no scheme", file(t, entry("a", "", marker)), `scheme "" is not one of`},
		{"duplicate name", file(t, entry("a", "stripe", marker), entry("a", "stripe", marker)), `provider 1: the name "a" is given twice`},
		{"too many", file(t, many...), "65 providers; at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := providers.Parse(tc.data)
			if err == nil {
				t.Fatalf("parsed %v; want an error", set)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SeCrEt") || strings.Contains(err.Error(), strings.TrimPrefix(swSecret, "whsec_")) {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(path, file(t, entry("a", "stripe", stripeSecret)), 0o600); err != nil {
		t.Fatal(err)
	}
	if set, err := providers.ReadFile(path); err != nil || set.Len() != 1 {
		t.Errorf("ReadFile: %v, %v; want one provider", set, err)
	}
	if _, err := providers.ReadFile(""); err == nil {
		t.Error(`ReadFile("") succeeded`)
	}
	if _, err := providers.ReadFile(filepath.Join(dir, "missing.json")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing): %v; want a not-exist error", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"providers":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := providers.ReadFile(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("ReadFile(bad): %v; want an error naming the file", err)
	}
}

func TestNilSet(t *testing.T) {
	var s *providers.Set
	if _, ok := s.Get("a"); ok || s.Names() != nil || s.Len() != 0 {
		t.Error("a nil *Set is not empty")
	}
}

// However a provider or a set is printed, logged or encoded, its secrets are not.
func TestProviderPrintsNoSecret(t *testing.T) {
	p := stripeProvider(stripeSecret, stripeNext)
	set, err := providers.Parse(file(t, entry("stripe-eu", "stripe", stripeSecret, stripeNext)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range []any{p, &p, p.Secrets, p.Secrets[0], set, []providers.Provider{p}, map[string]any{"p": p}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T %[1]v"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		data, _ := json.Marshal(v)
		out = append(out, string(data))
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("provider", "provider", p, "set", set, "secrets", p.Secrets)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("provider", "provider", p, "set", set)
	out = append(out, logs.String(), p.String())
	for _, s := range out {
		if strings.Contains(s, "stripeSecret") {
			t.Errorf("printed a secret: %s", s)
		}
	}
	if want := "provider stripe-test (principal shop-1, scheme stripe, secrets: 2)"; p.String() != want || fmt.Sprintf("%+v", p) != want {
		t.Errorf("String() %q, %%+v %q; want %q", p.String(), fmt.Sprintf("%+v", p), want)
	}
	if !strings.Contains(logs.String(), `"provider":{"name":"stripe-test","principal":"shop-1","scheme":"stripe","secrets":2}`) {
		t.Errorf("logged %s; want the provider's name, principal, scheme and number of secrets", logs.String())
	}
}
