package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/acme/orders/fault"
)

// The kinds of error a *Problem matches with errors.Is, as the service's problem codes name them.
// They are the service's own error kinds (package fault, which imports nothing but the standard
// library): errors.Is(err, client.ErrKeyReused) and errors.Is(err, fault.KeyReused) say the same.
var (
	// ErrInvalid: the request is malformed or the command invalid on its own (400 malformed-request,
	// invalid-command, idempotency-key-missing or -invalid; 413; 415; 431). Fix the request.
	ErrInvalid = fault.Invalid
	// ErrUnauthorized: a missing or unknown API key (401).
	ErrUnauthorized = fault.Unauthorized
	// ErrForbidden: the key's roles may not call the route (403).
	ErrForbidden = fault.Forbidden
	// ErrNotFound: no such order, line or payment, or another client's (404).
	ErrNotFound = fault.NotFound
	// ErrInFlight: a request with the same Idempotency-Key is still running (409
	// idempotency-key-in-flight); retried by the client until its attempts run out.
	ErrInFlight = fault.InFlight
	// ErrConflict: the order kept changing while the command ran, and it was not applied (409
	// concurrent-modification, with Retry-After); retried by the client, with its key, until its
	// attempts run out.
	ErrConflict = fault.Conflict
	// ErrRejected: the order's rules refuse the command (409 invalid-transition, 422
	// command-rejected, payment-id-taken). Final: a retry with the key replays it.
	ErrRejected = fault.Rejected
	// ErrPreconditionFailed: If-Match does not name the order's current version (412).
	ErrPreconditionFailed = fault.PreconditionFailed
	// ErrKeyReused: the Idempotency-Key was used for another request (422 idempotency-key-reused).
	ErrKeyReused = fault.KeyReused
	// ErrUnavailable: the service cannot answer now (503, 429); retried by the client until its
	// attempts run out.
	ErrUnavailable = fault.Unavailable
)

// Errors of answers that are not the service's: the API never redirects, and answers every
// success with the resource the call promises, as application/json. They are final: the client
// does not retry them.
var (
	// ErrRedirect: the answer was a redirect (3xx). The client follows none, so that the API key,
	// the body and the Idempotency-Key go to the base URL alone; a base URL that redirects (http
	// to https, a moved host) must be corrected in the configuration.
	ErrRedirect = errors.New("orders: redirect not followed")
	// ErrMalformedAnswer: a success (2xx) that is not application/json or not the resource the
	// call promises, such as an order without an id. A command that ends so may have been
	// carried out: read the order, or send the command again with
	// WithIdempotencyKey(meta.IdempotencyKey), which replays the service's answer.
	ErrMalformedAnswer = errors.New("orders: malformed answer")
)

// sentinelByCode maps the service's problem codes to the sentinel they match.
var sentinelByCode = map[string]error{
	"idempotency-key-missing":   ErrInvalid,
	"idempotency-key-invalid":   ErrInvalid,
	"malformed-request":         ErrInvalid,
	"invalid-command":           ErrInvalid,
	"payload-too-large":         ErrInvalid,
	"unsupported-media-type":    ErrInvalid,
	"headers-too-large":         ErrInvalid,
	"webhook-endpoint-invalid":  ErrInvalid,
	"unauthorized":              ErrUnauthorized,
	"forbidden":                 ErrForbidden,
	"not-found":                 ErrNotFound,
	"idempotency-key-in-flight": ErrInFlight,
	"concurrent-modification":   ErrConflict,
	"rebuild-in-progress":       ErrConflict,
	"invalid-transition":        ErrRejected,
	"command-rejected":          ErrRejected,
	"payment-id-taken":          ErrRejected,
	"webhook-url-refused":       ErrRejected,
	"webhook-endpoint-limit":    ErrRejected,
	"webhook-secret-withdrawn":  ErrRejected,
	"precondition-failed":       ErrPreconditionFailed,
	"idempotency-key-reused":    ErrKeyReused,
	"unavailable":               ErrUnavailable,
}

// sentinelByStatus is the sentinel of a problem whose code this client does not know: the
// contract's set of codes is open, and a client acts on the status.
var sentinelByStatus = map[int]error{
	http.StatusBadRequest:                  ErrInvalid,
	http.StatusUnauthorized:                ErrUnauthorized,
	http.StatusForbidden:                   ErrForbidden,
	http.StatusNotFound:                    ErrNotFound,
	http.StatusConflict:                    ErrConflict,
	http.StatusPreconditionFailed:          ErrPreconditionFailed,
	http.StatusRequestEntityTooLarge:       ErrInvalid,
	http.StatusUnsupportedMediaType:        ErrInvalid,
	http.StatusUnprocessableEntity:         ErrRejected,
	http.StatusRequestHeaderFieldsTooLarge: ErrInvalid,
	http.StatusTooManyRequests:             ErrUnavailable,
	http.StatusServiceUnavailable:          ErrUnavailable,
}

// Problem is an RFC 9457 problem details answer, and the error of every call the service
// answered with a status of 400 or more. Match it with errors.Is against the sentinels, or read
// it with errors.As.
type Problem struct {
	Type   string // "/problems/<code>"
	Title  string
	Status int // the answer's HTTP status
	Detail string
	// Code is the last segment of Type, such as "command-rejected"; "" if Type is not
	// /problems/<code> (an answer that was not problem+json, from a proxy say).
	Code string
	// Extra holds the members besides type, title, status and detail.
	Extra map[string]any
	// RequestID is the answer's X-Request-Id, which names the request in the service's logs.
	RequestID string
}

// Error returns the problem's status, code and detail.
func (p *Problem) Error() string {
	s := "orders: " + itoa(int64(p.Status))
	if p.Code != "" {
		s += " " + p.Code
	} else if p.Title != "" {
		s += " " + p.Title
	}
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

// Is reports whether target is the sentinel of p's code, or of its status for a code this
// client does not know.
func (p *Problem) Is(target error) bool {
	if s, ok := sentinelByCode[p.Code]; ok {
		return s == target
	}
	s, ok := sentinelByStatus[p.Status]
	return ok && s == target
}

// UnmarshalJSON reads a problem details object, keeping members it does not name in Extra.
func (p *Problem) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	fields := map[string]any{"type": &p.Type, "title": &p.Title, "status": &p.Status, "detail": &p.Detail}
	for name, raw := range m {
		if f, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, f); err != nil {
				return err
			}
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if p.Extra == nil {
			p.Extra = make(map[string]any)
		}
		p.Extra[name] = v
	}
	p.Code = codeOf(p.Type)
	return nil
}

// codeOf is the code of a problem type "/problems/<code>" (absolute URLs too), or "".
func codeOf(typ string) string {
	i := strings.LastIndex(typ, "/problems/")
	if i < 0 {
		return ""
	}
	return typ[i+len("/problems/"):]
}

// problemOf reads an error answer as a *Problem; an answer that is not a problem (a proxy's
// HTML) becomes one of its status with the status text as title.
func problemOf(a *answer) *Problem {
	p := new(Problem)
	if err := json.Unmarshal(a.body, p); err != nil || p.Type == "" {
		p = &Problem{Title: http.StatusText(a.status)}
	}
	p.Status = a.status // the answer's status is the truth, whatever a body says
	p.RequestID = a.header.Get("X-Request-Id")
	return p
}
