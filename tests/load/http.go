package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// request is one HTTP request of the workload.
type request struct {
	command           string // the workload's name of the command, for the figures
	method, path, key string
	body              []byte // nil: no body
}

func (r request) String() string { return r.method + " " + r.path + " key " + r.key }

// reply is a response read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

func (r reply) String() string {
	b := r.body
	if len(b) > 300 {
		b = append(b[:300:300], "…"...)
	}
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(b))
}

// problem is the problem type of a problem reply, such as "/problems/not-found", or "".
func (r reply) problem() string {
	if r.header.Get("Content-Type") != "application/problem+json" {
		return ""
	}
	_, after, ok := bytes.Cut(r.body, []byte(`"type":"`))
	if !ok {
		return ""
	}
	typ, _, _ := bytes.Cut(after, []byte(`"`))
	return string(typ)
}

// storedHeaders are the headers a replay must repeat (the HTTP contract).
var storedHeaders = []string{"Location", "ETag", "Log-Position", "Content-Type"}

// sameAnswer says how again differs from first as a replay of it, or "" if it replays it:
// the same status, body byte for byte, stored headers, and Idempotent-Replayed: true.
func sameAnswer(first, again reply) string {
	switch {
	case again.status != first.status:
		return fmt.Sprintf("status %d, first %d", again.status, first.status)
	case !bytes.Equal(again.body, first.body):
		return fmt.Sprintf("body %s, first %s", again, first)
	case !again.replayed():
		return "no Idempotent-Replayed: true"
	}
	for _, h := range storedHeaders {
		if again.header.Get(h) != first.header.Get(h) {
			return fmt.Sprintf("%s %q, first %q", h, again.header.Get(h), first.header.Get(h))
		}
	}
	return ""
}

// NewTransport returns a transport that keeps a connection per client alive: the default
// keeps two per host, and 64 clients would then open a connection for most requests.
func NewTransport(clients int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4 * clients,
		MaxIdleConnsPerHost: 4 * clients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// send makes one request and reads the reply.
func (w *worker) send(ctx context.Context, r request) (reply, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, w.cfg.URL()+r.path, body)
	if err != nil {
		return reply{}, err
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	if w.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.cfg.Token)
	}
	start := time.Now()
	res, err := w.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return reply{}, err
	}
	end := time.Now()
	out := reply{status: res.StatusCode, header: res.Header, body: raw}
	w.rec.request(r.command, start, end, out)
	return out, nil
}

// errGaveUp: a request got no usable answer within the configured patience.
var errGaveUp = errors.New("no answer")

// settle sends r until it has an answer that is not a passing condition: 409 in-flight and
// 409 concurrent-modification are retried at once (the server already waited), transport
// errors and 5xx are retried while the configured patience lasts (a server restarting).
func (w *worker) settle(ctx context.Context, r request) (reply, error) {
	deadline := time.Now().Add(w.cfg.Patience)
	conflictDeadline := time.Now().Add(w.cfg.RequestTimeout)
	for {
		out, err := w.send(ctx, r)
		switch {
		case ctx.Err() != nil:
			return reply{}, ctx.Err()
		case err != nil:
			w.rec.unanswered()
			if time.Now().After(deadline) {
				return reply{}, fmt.Errorf("%v: %w: %v", r, errGaveUp, err)
			}
			sleep(ctx, 20*time.Millisecond+rand.N(80*time.Millisecond))
			continue
		case out.status >= 500:
			w.rec.fault(r, out)
			if time.Now().After(deadline) {
				return out, fmt.Errorf("%v: %w: %v", r, errGaveUp, out)
			}
			sleep(ctx, 20*time.Millisecond+rand.N(80*time.Millisecond))
			continue
		case out.status == http.StatusConflict && (out.problem() == "/problems/idempotency-key-in-flight" ||
			out.problem() == "/problems/concurrent-modification"):
			if time.Now().After(conflictDeadline) {
				return out, fmt.Errorf("%v: still %v after %v", r, out, w.cfg.RequestTimeout)
			}
			sleep(ctx, 5*time.Millisecond+rand.N(20*time.Millisecond))
			continue
		}
		return out, nil
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
