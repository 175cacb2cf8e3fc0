package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// errAddressRefused: the URL's host resolved to an address deliveries may not go to.
var errAddressRefused = errors.New("address refused")

// notGlobal are the ranges of the IANA special-purpose address registries (IPv4 and IPv6) whose
// addresses are not globally reachable (private, shared, loopback, link-local, documentation,
// benchmarking, protocol assignments, reserved, multicast), so that a delivery reaches no
// address of this node's networks or of a cloud's metadata service (169.254.169.254,
// fd00:ec2::254, 100.100.100.200 are among them).
var notGlobal = prefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
	"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	"64:ff9b:1::/48", "100::/64", "2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16",
)

// globalUnicast6 is the IPv6 global unicast space: outside it (loopback, the IPv4-compatible
// ::/96, unique-local, link-local, site-local, multicast, reserved) nothing is globally
// reachable.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// The IPv6 forms that embed an IPv4 address, which is judged in their place: NAT64's
// well-known prefix (RFC 6052) and 6to4 (RFC 3056). IPv4-mapped addresses are unmapped.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

func prefixes(ps ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// refused reports whether a delivery may not go to a: any address that is not globally
// reachable unicast. It is the one check of an endpoint's addresses, at registration
// (CheckURL) and on every connection (newClient).
func refused(a netip.Addr) bool {
	a = embedded(a)
	if !a.IsValid() || a.Is6() && !globalUnicast6.Contains(a) {
		return true
	}
	for _, p := range notGlobal {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// embedded returns the IPv4 address an IPv6 address embeds (mapped, NAT64, 6to4), or a.
func embedded(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	b := a.As16()
	switch {
	case !a.Is6():
		return a
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return a
}

// CheckURL checks an endpoint's URL at registration: absolute, https (http too with
// allowPrivate), no user info, and a host that does not resolve to a refused address. The
// address is checked again on every connection (see newClient), since DNS may change.
func CheckURL(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%w: %q is not an absolute URL", ErrURLRefused, raw)
	case len(raw) > 2048:
		return fmt.Errorf("%w: longer than 2048 characters", ErrURLRefused)
	case u.User != nil:
		return fmt.Errorf("%w: %q carries user information", ErrURLRefused, raw)
	case u.Scheme != "https" && !(allowPrivate && u.Scheme == "http"):
		return fmt.Errorf("%w: %q is not https", ErrURLRefused, raw)
	case allowPrivate:
		return nil
	}
	host := u.Hostname()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%w: resolve %s: %v", ErrURLRefused, host, err)
	}
	for _, a := range addrs {
		if refused(a) {
			return fmt.Errorf("%w: %s resolves to %s, an address that is not globally reachable", ErrURLRefused, host, a)
		}
	}
	return nil
}

// maxResponseHeader bounds the headers of a receiver's answer: more is a failed attempt. Go's
// default, 10 MiB, would let 30 receivers hold hundreds of megabytes of this process's memory.
const maxResponseHeader = 16 << 10

// newClient is the HTTP client of deliveries: it never follows redirects, and (unless
// allowPrivate) checks every address it connects to, after DNS resolution, so that a name
// that resolved to a public address at registration cannot reach a private one later. It
// keeps at most conns idle connections to one host, and idle in all.
func newClient(allowPrivate bool, timeout time.Duration, conns, idle int) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || refused(ap.Addr()) {
				return fmt.Errorf("%w: %s", errAddressRefused, address)
			}
			return nil
		}
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext:            d.DialContext,
			TLSHandshakeTimeout:    timeout,
			MaxResponseHeaderBytes: maxResponseHeader,
			MaxIdleConns:           idle,
			MaxIdleConnsPerHost:    min(conns, idle),
			IdleConnTimeout:        90 * time.Second,
			ForceAttemptHTTP2:      true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Sign returns the webhook-signature header of a delivery: "v1,<base64 HMAC-SHA256>" for each
// key, over "id.timestamp.body", separated by spaces (Standard Webhooks, through its library).
func Sign(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		wh, _ := standardwebhooks.NewWebhookRaw(k)              // never fails
		sigs[i], _ = wh.Sign(id, time.Unix(timestamp, 0), body) // never fails
	}
	return strings.Join(sigs, " ")
}

// post makes one attempt: success is a 2xx within the timeout; at most maxBody bytes of the
// answer are read.
func post(ctx context.Context, client *http.Client, rawURL, id string, body []byte, keys [][]byte, timeout time.Duration, maxBody int64) Attempt {
	start := time.Now()
	a := Attempt{At: start.UTC()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		a.Error = err.Error()
		return a
	}
	ts := start.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "orders-webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(keys, id, ts, body))
	res, err := client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(res.Body, maxBody))
		res.Body.Close()
		a.Status = res.StatusCode
		if err == nil && (res.StatusCode < 200 || res.StatusCode > 299) {
			err = fmt.Errorf("answered %d", res.StatusCode)
		}
	}
	a.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		a.Error = err.Error()
		if len(a.Error) > 512 {
			a.Error = a.Error[:512]
		}
	}
	return a
}

// outcome names an attempt's result for metrics: ok, status (a non-2xx answer), timeout,
// refused (the address) or error.
func outcome(a Attempt) string {
	switch {
	case a.Error == "":
		return "ok"
	case a.Status != 0:
		return "status"
	case strings.Contains(a.Error, errAddressRefused.Error()):
		return "refused"
	case strings.Contains(a.Error, "deadline exceeded") || strings.Contains(a.Error, "timeout"):
		return "timeout"
	}
	return "error"
}
