package webhooks

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/fault"

	"github.com/acme/orders/eventstore"
)

var (
	// ErrNotFound: no such endpoint, or one of another principal.
	ErrNotFound = fault.New(fault.NotFound, "", "webhook endpoint not found")
	// ErrInvalid: the URL or the event types cannot be used.
	ErrInvalid = fault.New(fault.Invalid, "webhook-endpoint-invalid", "invalid webhook endpoint")
	// ErrURLRefused: the URL is not https, or names a loopback, private, link-local or
	// metadata address (without Config.AllowPrivate).
	ErrURLRefused = fault.New(fault.Rejected, "webhook-url-refused", "webhook URL refused")
	// ErrLimit: the principal has Config.MaxEndpoints endpoints already.
	ErrLimit = fault.New(fault.Rejected, "webhook-endpoint-limit", "too many webhook endpoints")
	// ErrContended: the streams a change reads and appends to at an exact revision kept
	// changing under it (other registrations, deletes or retries at once) past its tries. It
	// changed nothing; a retry after a moment goes through.
	ErrContended = fault.New(fault.Unavailable, "", "webhook streams kept changing; nothing was changed")
	// ErrSecretWithdrawn: the request's Idempotency-Key was answered with a signing secret
	// that is no longer shown: its endpoint is deleted, the secret rotated away, or the key
	// older than Config.KeyTTL.
	ErrSecretWithdrawn = fault.New(fault.Rejected, "webhook-secret-withdrawn", "the signing secret this Idempotency-Key was answered with is no longer shown")
	// ErrNotOwner: a signing secret is shown to its endpoint's owner only, so only the owner
	// rotates it.
	ErrNotOwner = fault.New(fault.Forbidden, "", "only the endpoint's owner rotates its secret; an admin may disable or delete it")
)

// Endpoint statuses.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
	StatusDeleted  = "deleted"
)

// Endpoint is an endpoint's stream folded.
type Endpoint struct {
	ID, Principal, URL, Description string
	Events                          []string
	Status                          string
	DisabledReason                  string
	CreatedAt                       time.Time
	// Start is the position of the registration: deliveries follow the log after it.
	Start    eventstore.Position
	Secrets  []Secret // the current one last
	Revision uint64   // of the endpoint's stream

	first     Secret            // the secret of the registration, for its replay
	rotations map[string]Secret // the latest rotations' secrets by Idempotency-Key, for their replays
}

// maxRotationsKept bounds the rotations an endpoint remembers for replays.
const maxRotationsKept = 16

// wants reports whether the endpoint subscribes to webhook event type t.
func (e *Endpoint) wants(t string) bool {
	return slices.Contains(e.Events, AllEvents) || slices.Contains(e.Events, t)
}

// Endpoints holds every endpoint in memory, read from their streams: the index stream names
// them, so a node reads no more than the endpoints' own streams.
type Endpoints struct {
	Store  eventstore.Store
	Sealer *Sealer
	Config *Config
	Now    func() time.Time

	registering sync.Mutex
	mu          sync.Mutex
	byID        map[string]*Endpoint
	indexNext   uint64 // the next revision of the index stream to read
}

// Refresh reads the endpoints changed since the last call, on any node.
func (es *Endpoints) Refresh(ctx context.Context) error {
	es.mu.Lock()
	from := es.indexNext
	es.mu.Unlock()
	changed := map[string]bool{}
	for e, err := range es.Store.ReadStream(ctx, indexStream, eventstore.ReadStreamOptions{From: from}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read webhook index: %w", err)
		}
		var ix Indexed
		if err := json.Unmarshal(e.Data, &ix); err != nil {
			return fmt.Errorf("webhook index at %d: %w", e.Revision, err)
		}
		changed[ix.ID] = true
		from = e.Revision + 1
	}
	for id := range changed {
		if err := es.Reload(ctx, id); err != nil {
			return err
		}
	}
	es.mu.Lock()
	es.indexNext = max(es.indexNext, from)
	es.mu.Unlock()
	return nil
}

// Reload reads endpoint id's stream again.
func (es *Endpoints) Reload(ctx context.Context, id string) error {
	ep, err := es.read(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.byID == nil {
		es.byID = map[string]*Endpoint{}
	}
	if old, ok := es.byID[id]; !ok || old.Revision <= ep.Revision {
		es.byID[id] = ep
	}
	return nil
}

func (es *Endpoints) read(ctx context.Context, id string) (*Endpoint, error) {
	var ep *Endpoint
	for e, err := range es.Store.ReadStream(ctx, endpointPrefix+id, eventstore.ReadStreamOptions{}) {
		if errors.Is(err, eventstore.ErrStreamNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read webhook endpoint %s: %w", id, err)
		}
		if e.Type == TypeRegistered {
			ep = &Endpoint{Start: e.Position}
		}
		if ep == nil {
			continue // a void that a registration may follow
		}
		if err := ep.apply(e); err != nil {
			return nil, fmt.Errorf("webhook endpoint %s at %d: %w", id, e.Revision, err)
		}
	}
	if ep == nil {
		return nil, ErrNotFound
	}
	return ep, nil
}

func (ep *Endpoint) apply(e eventstore.RecordedEvent) error {
	ep.Revision = e.Revision
	switch e.Type {
	case TypeRegistered:
		var r Registered
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return err
		}
		ep.register(r)
	case TypeSecretRotated:
		var r SecretRotated
		if err := json.Unmarshal(e.Data, &r); err != nil {
			return err
		}
		until := r.At.Add(rotationOverlap)
		prev := ep.Secrets[len(ep.Secrets)-1]
		prev.ExpiresAt = &until
		ep.Secrets = []Secret{prev, r.Secret}
		if ep.rotations == nil || len(ep.rotations) >= maxRotationsKept {
			ep.rotations = map[string]Secret{}
		}
		if r.Key != "" {
			ep.rotations[r.Key] = r.Secret
		}
	case TypeDisabled:
		var d Disabled
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		ep.Status, ep.DisabledReason = StatusDisabled, d.Reason
	case TypeEnabled:
		ep.Status, ep.DisabledReason = StatusEnabled, ""
	case TypeDeleted:
		ep.Status = StatusDeleted
	}
	return nil
}

// register sets the endpoint as its registration r makes it.
func (ep *Endpoint) register(r Registered) {
	ep.ID, ep.Principal, ep.URL, ep.Description, ep.Events = r.ID, r.Principal, r.URL, r.Description, r.Events
	ep.Secrets, ep.Status, ep.CreatedAt, ep.first = []Secret{r.Secret}, StatusEnabled, r.At, r.Secret
}

// rotationOverlap is how long a replaced secret keeps signing beside the new one.
const rotationOverlap = 24 * time.Hour

// Get returns endpoint id if principal may see it: its own, or any with all set.
func (es *Endpoints) Get(id, principal string, all bool) (Endpoint, error) {
	es.mu.Lock()
	defer es.mu.Unlock()
	ep, ok := es.byID[id]
	if !ok || ep.Status == StatusDeleted || (!all && ep.Principal != principal) {
		return Endpoint{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return *ep, nil
}

// List returns principal's endpoints (every principal's with all), oldest first.
func (es *Endpoints) List(principal string, all bool) []Endpoint {
	es.mu.Lock()
	defer es.mu.Unlock()
	var out []Endpoint
	for _, ep := range es.byID {
		if ep.Status != StatusDeleted && (all || ep.Principal == principal) {
			out = append(out, *ep)
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID)) })
	return out
}

// none reports whether no endpoint is registered, in any status: nothing runs deliveries.
func (es *Endpoints) none() bool {
	es.mu.Lock()
	defer es.mu.Unlock()
	return len(es.byID) == 0
}

// active returns the endpoints that deliveries go to.
func (es *Endpoints) active() []Endpoint {
	es.mu.Lock()
	defer es.mu.Unlock()
	var out []Endpoint
	for _, ep := range es.byID {
		if ep.Status == StatusEnabled {
			out = append(out, *ep)
		}
	}
	return out
}

// EndpointID is the id of the endpoint that principal's request with Idempotency-Key key
// registers: a retry whose key's record is gone still finds the endpoint its first request
// made (Registration.Repeated).
func EndpointID(principal, key string) string {
	sum := sha256.Sum256([]byte(principal + "\x00" + key))
	return "we_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16]))
}

// IsEndpointID reports whether id has the form of an endpoint's id (EndpointID), which no
// order id has: the subject of a key that registered an endpoint or rotated its secret.
func IsEndpointID(id string) bool { return strings.HasPrefix(id, "we_") }

// Shown returns endpoint id and a signing secret it drew, for the answer to the request that
// drew it and to that request's retries, while the secret may be shown (showAgain): its
// registration's, or, with rotation set, that of its rotation with that Idempotency-Key.
func (es *Endpoints) Shown(ctx context.Context, id, rotation string) (Endpoint, string, error) {
	ep, found, err := es.Registered(ctx, id)
	if err != nil {
		return Endpoint{}, "", err
	}
	s, ok := ep.first, true
	if rotation != "" {
		s, ok = ep.rotations[rotation]
	}
	switch {
	case !found || (rotation != "" && ep.Status == StatusDeleted):
		return Endpoint{}, "", fmt.Errorf("%w: %s", ErrNotFound, id) // as for a rotation of it
	case !ok:
		return Endpoint{}, "", fmt.Errorf("%w: endpoint %s has no recent rotation of this key", ErrSecretWithdrawn, id)
	}
	secret, err := es.showAgain(ep, s)
	return ep, secret, err
}

// showAgain returns secret s of endpoint ep, in clear, for the answer to the request that drew
// it and to that request's retries, if it may still be shown: the endpoint is not deleted, the
// secret is its current one, and the key is younger than Config.KeyTTL. A secret rotated away
// still signs for a while, and a deleted endpoint's receiver may still trust it: shown again,
// it would let whoever holds the key forge deliveries.
func (es *Endpoints) showAgain(ep Endpoint, s Secret) (string, error) {
	switch {
	case ep.Status == StatusDeleted:
		return "", fmt.Errorf("%w: endpoint %s is deleted", ErrSecretWithdrawn, ep.ID)
	case ep.Secrets[len(ep.Secrets)-1].Sealed != s.Sealed:
		return "", fmt.Errorf("%w: the secret of endpoint %s was rotated since; rotate it again for a new one", ErrSecretWithdrawn, ep.ID)
	case es.Config.KeyTTL > 0 && es.Now().Sub(s.CreatedAt) > es.Config.KeyTTL:
		return "", fmt.Errorf("%w: the key is older than %v; rotate the secret of endpoint %s for a new one", ErrSecretWithdrawn, es.Config.KeyTTL, ep.ID)
	}
	key, err := es.Sealer.Open(ep.ID, s.Sealed)
	if err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// lookup returns endpoint id, deleted or not.
func (es *Endpoints) lookup(id string) (Endpoint, bool) {
	es.mu.Lock()
	defer es.mu.Unlock()
	ep, ok := es.byID[id]
	if !ok {
		return Endpoint{}, false
	}
	return *ep, true
}

// Check checks what a registration asks for: the URL (CheckURL) and the event types.
func (es *Endpoints) Check(ctx context.Context, rawURL string, events []string) error {
	if err := es.checkEvents(events); err != nil {
		return err
	}
	return CheckURL(ctx, rawURL, es.Config.AllowPrivate)
}

func (es *Endpoints) checkEvents(events []string) error {
	if len(events) == 0 {
		return fmt.Errorf("%w: events: name at least one event type, or %q", ErrInvalid, AllEvents)
	}
	if len(events) > len(eventTypes)+1 {
		return fmt.Errorf("%w: events: %d names, more than there are event types", ErrInvalid, len(events))
	}
	for _, t := range events {
		if !knownType(t) {
			return fmt.Errorf("%w: events: unknown event type %q (known: %q and %v)", ErrInvalid, t, AllEvents, EventTypes())
		}
	}
	return nil
}

// SetStatus disables (with reason), enables or deletes endpoint id.
func (es *Endpoints) SetStatus(ctx context.Context, id, principal string, all bool, status, reason string) (Endpoint, error) {
	ep, err := es.Get(id, principal, all)
	if old, ok := es.lookup(id); err != nil && ok && status == StatusDeleted && old.Status == StatusDeleted && (all || old.Principal == principal) {
		return old, nil // deleting is naturally idempotent
	}
	if err != nil {
		return Endpoint{}, err
	}
	if ep.Status == status {
		return ep, nil
	}
	now := es.Now().UTC()
	var typ string
	var data any
	switch status {
	case StatusDisabled:
		typ, data = TypeDisabled, Disabled{Reason: reason, By: principal, At: now}
	case StatusEnabled:
		typ, data = TypeEnabled, Enabled{By: principal, At: now}
	default:
		typ, data = TypeDeleted, Deleted{By: principal, At: now}
	}
	if err := es.record(ctx, id, eventstore.Exact(ep.Revision), typ, data); err != nil {
		return Endpoint{}, err
	}
	if status == StatusDeleted {
		// A slot left held by a failure here is freed by the next registration that needs it.
		_ = es.release(ctx, ep.Principal, id)
	}
	ep, _ = es.Get(id, principal, true)
	return ep, nil
}

// record appends a change of endpoint id and names it in the index, after the appends of
// before, in one atomic append where the store can; then reads the endpoint back.
func (es *Endpoints) record(ctx context.Context, id string, expected eventstore.ExpectedRevision, typ string, v any, before ...eventstore.StreamAppend) error {
	appends, err := changeAppends(id, expected, typ, v, before...)
	if err == nil {
		_, err = eventstore.Write(ctx, es.Store, appends...)
	}
	if err != nil {
		return fmt.Errorf("record %s of webhook endpoint %s: %w", typ, id, err)
	}
	return es.Reload(ctx, id)
}

// keys returns the endpoint's signing keys in clear: the current one, and a replaced one
// while it still signs.
func (es *Endpoints) keys(ep Endpoint, now time.Time) ([][]byte, error) {
	var keys [][]byte
	for _, s := range ep.Secrets {
		if s.ExpiresAt != nil && now.After(*s.ExpiresAt) {
			continue
		}
		k, err := es.Sealer.Open(ep.ID, s.Sealed)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}
