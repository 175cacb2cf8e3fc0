package providers

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/acme/orders/access"
	"github.com/acme/orders/internal/opsfile"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Scheme is how a provider signs its deliveries and writes its events.
type Scheme string

// The schemes; doc.go describes each.
const (
	StandardWebhooks Scheme = "standard-webhooks"
	Stripe           Scheme = "stripe"
)

// schemes are the known schemes, in the order errors list them.
var schemes = []Scheme{StandardWebhooks, Stripe}

// MaxProviders bounds the providers of one file.
const MaxProviders = 64

// Bounds of a provider's fields, checked by Parse.
const (
	maxName         = 64
	maxSecrets      = 2 // the secret in use and, during a rotation, the next one
	maxSecretLength = 256
	minKeyBytes     = 16 // the least key a secret may give: 128 bits
	maxFileBytes    = 1 << 20
)

// secretPrefix starts the secrets of both schemes.
const secretPrefix = "whsec_"

// Provider is a payment provider that sends the service signed callbacks.
type Provider struct {
	Name      string   `json:"name"`      // 1–64 of [a-z0-9-], starting with a letter or digit: a path segment and a metrics label
	Principal string   `json:"principal"` // the principal whose orders its events act on, named as an API key's
	Scheme    Scheme   `json:"scheme"`
	Secrets   []Secret `json:"secrets"` // one, or two during a rotation; either verifies a delivery
}

// Secret is a signing secret. It prints, logs and encodes to JSON as "[redacted]", so that a
// Provider printed by mistake does not reveal it; string(s) is its value.
type Secret string

const redacted = "[redacted]"

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]", for %#v.
func (Secret) GoString() string { return redacted }

// Format writes "[redacted]" whatever the verb, so that no verb of fmt prints the value.
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue returns "[redacted]".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes "[redacted]": the package reads secrets, it never writes them.
func (Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// String describes p without its secrets: name, principal, scheme and how many secrets.
func (p Provider) String() string {
	return fmt.Sprintf("provider %s (principal %s, scheme %s, secrets: %d)", p.Name, p.Principal, p.Scheme, len(p.Secrets))
}

// Format writes p.String() whatever the verb: without it, %+v and %#v would print the fields.
func (p Provider) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", p.String())
		return
	}
	io.WriteString(f, p.String())
}

// LogValue logs p's name, principal, scheme and number of secrets.
func (p Provider) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", p.Name),
		slog.String("principal", p.Principal),
		slog.String("scheme", string(p.Scheme)),
		slog.Int("secrets", len(p.Secrets)),
	)
}

// Set is the providers of one file. It is immutable once made: Get returns copies.
type Set struct {
	byName map[string]Provider
	names  []string // sorted
}

// Parse reads a providers file: {"providers":[{"name":…,"principal":…,"scheme":…,"secrets":[…]},…]}.
// Unknown fields are refused. Its errors name the provider and the field at fault, never a
// secret's value.
func Parse(data []byte) (*Set, error) {
	var f struct {
		Providers []Provider `json:"providers"`
	}
	if err := opsfile.Decode(data, &f); err != nil {
		return nil, decodeError(err)
	}
	switch n := len(f.Providers); {
	case n == 0:
		return nil, errors.New("no providers")
	case n > MaxProviders:
		return nil, fmt.Errorf("%d providers; at most %d", n, MaxProviders)
	}
	s := &Set{byName: make(map[string]Provider, len(f.Providers))}
	for i, p := range f.Providers {
		if err := p.check(); err != nil {
			return nil, fmt.Errorf("provider %d (%q): %w", i, p.Name, err)
		}
		if _, dup := s.byName[p.Name]; dup {
			return nil, fmt.Errorf("provider %d: the name %q is given twice", i, p.Name)
		}
		s.byName[p.Name] = p
		s.names = append(s.names, p.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// decodeError describes an error of the JSON decoder by where it is, not by what is there: a
// syntax error quotes the character it stopped at, which may be a secret's.
func decodeError(err error) error {
	if serr, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("not valid JSON (at byte %d)", serr.Offset)
	}
	if terr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return fmt.Errorf("%s: a JSON %s where %s belongs", cmp.Or(terr.Field, "the file"), terr.Value, jsonKind(terr.Type))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not valid JSON (it ends early)")
	}
	if errors.Is(err, io.EOF) {
		return errors.New("empty")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: ")) // an unknown field: its name, not a value
}

// jsonKind names the JSON that a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// ReadFile reads and parses the providers file at path.
func ReadFile(path string) (*Set, error) {
	if path == "" {
		return nil, errors.New("no providers file given")
	}
	data, err := opsfile.Read(path, maxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("providers file: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Get returns the provider named name.
func (s *Set) Get(name string) (Provider, bool) {
	if s == nil {
		return Provider{}, false
	}
	p, ok := s.byName[name]
	p.Secrets = slices.Clone(p.Secrets) // the set's own stay as they are
	return p, ok
}

// Names returns the providers' names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Len returns the number of providers.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.names)
}

// String lists the providers' names.
func (s *Set) String() string {
	return "providers [" + strings.Join(s.Names(), " ") + "]"
}

// Format writes s.String() whatever the verb: without it, %+v would print every provider's
// fields, which fmt reaches through unexported fields without calling their methods.
func (s *Set) Format(f fmt.State, _ rune) { io.WriteString(f, s.String()) }

// LogValue logs the providers' names.
func (s *Set) LogValue() slog.Value { return slog.AnyValue(s.Names()) }

// check checks p's fields; its errors never contain a secret.
func (p Provider) check() error {
	if err := checkName(p.Name); err != nil {
		return err
	}
	if err := access.ValidatePrincipal(p.Principal); err != nil {
		return err
	}
	if !slices.Contains(schemes, p.Scheme) {
		return fmt.Errorf("scheme %q is not one of %s", p.Scheme, schemeList())
	}
	if n := len(p.Secrets); n < 1 || n > maxSecrets {
		return fmt.Errorf("secrets: %d given; one, or two during a rotation", n)
	}
	for i, s := range p.Secrets {
		if err := p.Scheme.checkSecret(string(s)); err != nil {
			return fmt.Errorf("secret %d: %w", i+1, err)
		}
	}
	return nil
}

func schemeList() string {
	names := make([]string, len(schemes))
	for i, s := range schemes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// checkName checks a provider's name: it is a path segment and a metrics label.
func checkName(name string) error {
	if name == "" || len(name) > maxName || name[0] == '-' {
		return fmt.Errorf("name %q: 1 to %d characters of a-z, 0-9 and -, not starting with -", name, maxName)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("name %q: only a-z, 0-9 and -", name)
		}
	}
	return nil
}

// checkSecret checks that s is a secret of the scheme. Its errors never contain s.
func (sc Scheme) checkSecret(s string) error {
	if !strings.HasPrefix(s, secretPrefix) {
		return fmt.Errorf("does not start with %s", secretPrefix)
	}
	if len(s) > maxSecretLength {
		return fmt.Errorf("longer than %d characters", maxSecretLength)
	}
	switch sc {
	case StandardWebhooks:
		// The library decodes the key as it will to sign and verify; it keeps the key to
		// itself, so its length is read here.
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if _, werr := standardwebhooks.NewWebhook(s); werr != nil || err != nil {
			return fmt.Errorf("is not %s followed by base64", secretPrefix)
		}
		if len(key) < minKeyBytes {
			return fmt.Errorf("gives a key of %d bytes; at least %d", len(key), minKeyBytes)
		}
	case Stripe:
		// Stripe's key is the secret's text as it is, prefix and all.
		if len(s) < minKeyBytes {
			return fmt.Errorf("shorter than %d characters", minKeyBytes)
		}
	}
	return nil
}
