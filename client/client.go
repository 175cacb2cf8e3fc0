package client

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of New's options.
const (
	DefaultMaxAttempts    = 5
	DefaultBaseDelay      = 100 * time.Millisecond
	DefaultMaxDelay       = 5 * time.Second
	DefaultAttemptTimeout = 30 * time.Second
)

// maxAnswer bounds the bytes read of one answer: a page of 500 orders fits many times over.
const maxAnswer = 32 << 20

// Client calls the order service. It is safe for concurrent use.
type Client struct {
	base           string // the service's URL without a trailing slash
	http           *http.Client
	apiKey         string
	maxAttempts    int
	baseDelay      time.Duration
	maxDelay       time.Duration
	attemptTimeout time.Duration
	session        *position // nil unless the client is a Session
}

// Option configures a Client.
type Option func(*Client)

// New returns a client of the service at baseURL, such as "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		base:           strings.TrimRight(baseURL, "/"),
		http:           http.DefaultClient,
		maxAttempts:    DefaultMaxAttempts,
		baseDelay:      DefaultBaseDelay,
		maxDelay:       DefaultMaxDelay,
		attemptTimeout: DefaultAttemptTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	c.http = refusingRedirects(c.http)
	return c
}

// refusingRedirects is a copy of hc that hands a redirect back instead of following it, so that
// the API key, the body and the Idempotency-Key go to the base URL alone; hc is not changed.
func refusingRedirects(hc *http.Client) *http.Client {
	own := *hc
	own.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &own
}

// WithHTTPClient sends the requests with a copy of hc instead of http.DefaultClient: its
// transport, cookie jar and timeout, but never following a redirect (ErrRedirect), whatever its
// CheckRedirect says.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithAPIKey sends key as the bearer token of every request. A server in development mode needs
// none.
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithMaxAttempts bounds the attempts of one call, the first included (default 5; at least 1).
func WithMaxAttempts(n int) Option { return func(c *Client) { c.maxAttempts = max(n, 1) } }

// WithBackoff sets the back-off between attempts: the n-th retry waits a random duration up to
// min(maxDelay, base·2ⁿ⁻¹) (defaults 100 ms and 5 s), and at least the answer's Retry-After,
// though never more than maxDelay: a longer Retry-After is cut to maxDelay.
func WithBackoff(base, maxDelay time.Duration) Option {
	return func(c *Client) {
		c.baseDelay = max(base, time.Millisecond)
		c.maxDelay = max(maxDelay, c.baseDelay)
	}
}

// WithAttemptTimeout bounds each attempt, from sending the request to reading the whole answer
// (default 30 s). An attempt that runs out of time is retried with the same key.
func WithAttemptTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.attemptTimeout = d
		}
	}
}

// Session returns a client that shares c's configuration and remembers the highest
// Log-Position its commands were answered with; its reads wait until the read models have
// applied the log up to it (a larger WithMinPosition still wins). Use one per user or flow whose
// reads must see its own writes, across service nodes too.
func (c *Client) Session() *Client {
	s := *c
	s.session = new(position)
	return &s
}

// Position is the highest Log-Position the session's commands were answered with; 0 for a
// client that is not a session or has sent no command.
func (c *Client) Position() uint64 {
	if c.session == nil {
		return 0
	}
	return c.session.Load()
}

// position is a session's log position, which only grows.
type position struct{ atomic.Uint64 }

func (p *position) observe(v uint64) {
	for {
		cur := p.Load()
		if v <= cur || p.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Meta is what a call learnt besides its answer's body.
type Meta struct {
	// Attempts is how many attempts the call made, the first included. (net/http may itself
	// resend a request with an Idempotency-Key once, within an attempt, when a reused
	// connection closes before answering; that resend carries the same key.)
	Attempts int
	// Replayed is true when the answer is the stored outcome of an earlier attempt with the same
	// Idempotency-Key (the Idempotent-Replayed header).
	Replayed bool
	// IdempotencyKey is the key the command's attempts carried; "" for reads.
	IdempotencyKey string
	// LogPosition is the global log position of the order's last event (the Log-Position
	// header): pass it to WithMinPosition to read the command's effect.
	LogPosition uint64
	// ETag is the order's entity tag, `"v<version>"`.
	ETag string
	// RequestID is the X-Request-Id of the last attempt's answer, which names it in the logs.
	RequestID string
}

// CallOption configures one call.
type CallOption func(*call)

// call is what CallOptions set.
type call struct {
	key         string
	ifMatch     string
	minPosition uint64
}

// WithIdempotencyKey sends key as the command's Idempotency-Key instead of a new ULID: to retry
// a call that failed for good on the client's side (the process restarted, the context ended)
// and still have the service carry the command out once. Reads ignore it.
func WithIdempotencyKey(key string) CallOption { return func(c *call) { c.key = key } }

// WithIfMatch makes a command apply only to the order at version (If-Match: "v<version>");
// otherwise it is answered 412, ErrPreconditionFailed. Reads ignore it.
func WithIfMatch(version int64) CallOption {
	return func(c *call) { c.ifMatch = `"v` + itoa(version) + `"` }
}

// WithMinPosition makes a read wait (at most 2 s on the server, then 503 and a retry) until the
// read model has applied the log up to p, such as a command's Meta.LogPosition. Commands ignore
// it.
func WithMinPosition(p uint64) CallOption {
	return func(c *call) { c.minPosition = max(c.minPosition, p) }
}

func (c *Client) callOptions(opts []CallOption) call {
	var o call
	for _, f := range opts {
		f(&o)
	}
	if c.session != nil {
		o.minPosition = max(o.minPosition, c.session.Load())
	}
	return o
}
