package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acme/orders/fault"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"
)

// maxBody is the largest request body accepted, in bytes.
const maxBody = 1 << 20

// A body refused as too large is read on after the answer, up to drainBody bytes within
// drainWait: net/http closes the connection after that answer, and closing it with bytes
// unread resets it, so that a client still sending would lose the answer. A larger or slower
// body is cut off, its answer left to chance.
const (
	drainBody = 8 << 20
	drainWait = 3 * time.Second
)

// limitBody refuses a body over maxBody with 413 payload-too-large when the handler reads it:
// at its first read when its Content-Length says so, else when a read passes the limit. The
// route's checks that need no body (authentication, access) come first, so that an
// unauthenticated request is 401 whatever its body.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		body := req.Body
		left := int64(maxBody)
		if req.ContentLength > maxBody {
			left = -1 // declared too large: no byte of it is read
		}
		req.Body = &limitedBody{ReadCloser: body, left: left}
		err := next(c)
		if errors.Is(err, echo.ErrStatusRequestEntityTooLarge) || err != nil && req.ContentLength > maxBody {
			answerDraining(c, err, body)
		}
		return err
	}
}

// limitedBody reads at most one byte past the limit from its body, and fails from there on.
type limitedBody struct {
	io.ReadCloser
	left int64 // bytes the body may still have; below zero once it has more
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, echo.ErrStatusRequestEntityTooLarge
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left+1)])
	b.left -= int64(n)
	if b.left < 0 {
		return n, echo.ErrStatusRequestEntityTooLarge
	}
	return n, err
}

// answerDraining answers err, then reads and drops what is left of body (see drainBody), which
// is too large or will be: the answer is not lost to a reset connection. A client that waits
// for 100 Continue before it sends a body, and got none, sends nothing more.
func answerDraining(c echo.Context, err error, body io.Reader) {
	req := c.Request()
	waits := req.ContentLength > maxBody && strings.EqualFold(req.Header.Get("Expect"), "100-continue")
	rc := http.NewResponseController(c.Response())
	if !waits {
		// Else net/http would read at most 256 KiB of the body before the answer, then close.
		rc.EnableFullDuplex()
	}
	c.Response().Header().Set(echo.HeaderConnection, "close")
	c.Error(err)
	if waits {
		return
	}
	rc.Flush()
	rc.SetReadDeadline(time.Now().Add(drainWait))
	io.CopyN(io.Discard, body, drainBody)
}

// defaultBodyMemory is the default of Server.BodyMemory.
const defaultBodyMemory = 16 << 20

// defaultProviderBodyMemory is the default of Server.ProviderBodyMemory: four bodies of the
// largest size at once, where a provider's events are a few KiB.
const defaultProviderBodyMemory = 4 << 20

const (
	// freeBody is how much of every body is read without the budget, so that the small bodies
	// of everyday commands never wait behind large ones; the number of connections bounds them.
	freeBody = 16 << 10
	// bodyWait bounds how long a body waits for room in the budget; then the answer is 503.
	bodyWait = time.Second
)

// errBodiesBusy: the budget of bodies in flight stayed full for bodyWait.
var errBodiesBusy = fault.New(fault.Unavailable, "", "the server is reading as many large request bodies as it may at once; retry")

// bodyBudget counts the bytes of request bodies read and not yet checked, past the first
// freeBody of each: a body and what its checks make of it (a 1 MB body took some 5 MB to
// fingerprint) are bounded by it, however many clients send large bodies at once.
type bodyBudget struct {
	once sync.Once
	size int64
	sem  *semaphore.Weighted
}

// of is b, made on first use with size bytes, or def if size is not positive.
func (b *bodyBudget) of(size, def int64) *bodyBudget {
	b.once.Do(func() {
		b.size = size
		if b.size <= 0 {
			b.size = def
		}
		b.sem = semaphore.NewWeighted(b.size)
	})
	return b
}

// bodyBudget is the budget of the bodies of authenticated requests.
func (s *Server) bodyBudget() *bodyBudget { return s.bodies.of(s.BodyMemory, defaultBodyMemory) }

// providerBodyBudget is the budget of the bodies of payment providers' deliveries, which are
// read before they are verified: anyone can send one, and with a budget of their own they
// cannot take the room of the commands of authenticated clients.
func (s *Server) providerBodyBudget() *bodyBudget {
	return s.providerBodies.of(s.ProviderBodyMemory, defaultProviderBodyMemory)
}

// readBody reads the request's body within the budget of authenticated requests' bodies (see
// readBodyWithin).
func (s *Server) readBody(c echo.Context) (body []byte, release func(), err error) {
	return readBodyWithin(c, s.bodyBudget())
}

// readBodyWithin reads the request's body. Its bytes past the first freeBody are taken from
// budget as the buffer grows to receive them, not as Content-Length announces them: a client
// that announces a large body and sends it slowly holds only what it sent. A body larger than
// the whole budget takes all of it. release gives the bytes back; call it once the body is
// checked and fingerprinted, before the command runs.
func readBodyWithin(c echo.Context, budget *bodyBudget) (body []byte, release func(), err error) {
	req := c.Request()
	var held int64
	want := req.ContentLength // -1 when unknown (chunked)
	size := int64(freeBody)
	if want >= 0 && want < size {
		size = want
	}
	body = make([]byte, 0, size)
	for {
		if len(body) == cap(body) {
			if want >= 0 && int64(len(body)) >= want {
				return body, budget.releaser(held), nil // net/http never reads past Content-Length
			}
			next := min(2*cap(body), maxBody+1)
			if want >= 0 {
				next = min(next, int(want))
			}
			if charge := min(int64(next-max(cap(body), freeBody)), budget.size-held); charge > 0 {
				ctx, cancel := context.WithTimeout(req.Context(), bodyWait)
				err := budget.sem.Acquire(ctx, charge)
				cancel()
				if err != nil {
					budget.sem.Release(held)
					return nil, nil, fmt.Errorf("%w (waited %v)", errBodiesBusy, bodyWait)
				}
				held += charge
			}
			body = slices.Grow(body, next-len(body))
		}
		n, err := req.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		switch {
		case errors.Is(err, io.EOF):
			return body, budget.releaser(held), nil
		case err != nil:
			budget.sem.Release(held)
			return nil, nil, bodyError(err)
		}
	}
}

// releaser returns the function that gives held bytes back to the budget; one that does
// nothing for a body within freeBody, the everyday case, which so costs no allocation.
func (b *bodyBudget) releaser(held int64) func() {
	if held == 0 {
		return func() {}
	}
	return sync.OnceFunc(func() { b.sem.Release(held) }) // a deferred call after the first is a no-op
}

// bodyError is the answer to a body that could not be read.
func bodyError(err error) error {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return err // the body limit's 413
	}
	// Shorter than its Content-Length, badly chunked, too slow: the client's fault.
	return fmt.Errorf("%w: the body could not be read: %v", errMalformed, err)
}
