package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// request is one logical call, sent once per attempt.
type request struct {
	method string
	path   string // escaped, with its query
	body   []byte // nil for none
	key    string // Idempotency-Key; "" for reads
	call   call
}

// answer is an attempt's complete answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// Retryable reports whether an answer with status and header h is one the service did not keep
// for its Idempotency-Key, so that the command sent again with the key may go otherwise: a 5xx,
// a 429, or any answer that asks for a wait (Retry-After: the key in flight elsewhere, the order
// changing under the command, a provider's event before the one it follows). Any other answer
// is the command's for good: the service keeps it for the key, so a retry would only replay it,
// or it names a mistake that a retry repeats. The client retries by this rule, and so does the
// NATS intake.
func Retryable(status int, h http.Header) bool {
	return status >= 500 || status == http.StatusTooManyRequests || h.Get("Retry-After") != ""
}

// backoff is the wait before retry n (1 for the first retry): a uniformly random duration in
// [0, min(maxDelay, base·2ⁿ⁻¹)] (full jitter), and at least retryAfter up to maxDelay: an
// answer may ask for any wait, even years, and the call must still end. rnd(k) returns a
// random int64 in [0, k).
func backoff(n int, base, maxDelay, retryAfter time.Duration, rnd func(int64) int64) time.Duration {
	ceiling := maxDelay
	if n-1 < 32 && base<<(n-1) < maxDelay && base<<(n-1) > 0 {
		ceiling = base << (n - 1)
	}
	return max(time.Duration(rnd(int64(ceiling)+1)), min(retryAfter, maxDelay))
}

// Backoff is the wait the client makes before retry n (1 for the first) with WithBackoff(base,
// maxDelay), after an answer whose Retry-After header (h) asked for a wait: what any other
// intake that retries the service's answers waits too (the NATS intake's redeliveries).
func Backoff(n int, base, maxDelay time.Duration, h http.Header) time.Duration {
	return backoff(n, base, maxDelay, retryAfter(h), rand.Int64N)
}

// retryAfter reads a Retry-After header given in seconds; 0 if absent or not seconds.
func retryAfter(h http.Header) time.Duration {
	s, err := strconv.ParseInt(h.Get("Retry-After"), 10, 32)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}

// do sends req until an attempt is final, the attempts run out or the next wait would pass
// ctx's deadline. It returns a 2xx answer, or the last attempt's error: a *Problem for an
// error answer, ErrRedirect for a redirect, which is final.
func (c *Client) do(ctx context.Context, req request, meta *Meta) (*answer, error) {
	meta.IdempotencyKey = req.key
	for n := 1; ; n++ {
		meta.Attempts = n
		ans, err := c.attempt(ctx, req)
		if err == nil && ans.status < 300 {
			return ans, nil
		}
		if err == nil && ans.status < 400 {
			loc := ans.header.Get("Location")
			return nil, fmt.Errorf("%s %s: %w: %d to %q", req.method, req.path, ErrRedirect, ans.status, loc)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", req.method, req.path, ctx.Err())
		}
		var wait time.Duration
		if err == nil {
			p := problemOf(ans)
			if !Retryable(ans.status, ans.header) {
				return nil, p
			}
			err, wait = p, retryAfter(ans.header)
		} else {
			err = fmt.Errorf("%s %s: %w", req.method, req.path, err)
		}
		if n >= c.maxAttempts {
			return nil, err
		}
		wait = backoff(n, c.baseDelay, c.maxDelay, wait, rand.Int64N)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return nil, err
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s %s: %w", req.method, req.path, err)
		}
	}
}

// attempt sends req once and reads the whole answer within the attempt timeout. err is set for
// no answer or an answer cut short; an HTTP error status is not an error here.
func (c *Client) attempt(ctx context.Context, req request) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	r, err := http.NewRequestWithContext(ctx, req.method, c.base+req.path, body)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Accept", "application/json, application/problem+json")
	if req.body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if req.key != "" {
		r.Header.Set("Idempotency-Key", req.key)
	}
	if req.call.ifMatch != "" && req.key != "" {
		r.Header.Set("If-Match", req.call.ifMatch)
	}
	if c.apiKey != "" {
		r.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	res, err := c.http.Do(r)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read answer %d: %w", res.StatusCode, err)
	}
	if len(data) > maxAnswer {
		return nil, errors.New("answer larger than the client reads")
	}
	return &answer{status: res.StatusCode, header: res.Header, body: data}, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
