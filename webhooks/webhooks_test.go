package webhooks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/orders/eventstore"
	"github.com/acme/orders/eventstore/sqlite"
	"github.com/acme/orders/lease"
)

// The signature of the Standard Webhooks specification's example: the same secret, id,
// timestamp and body give the spec's signature.
func TestSignMatchesTheSpecification(t *testing.T) {
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // the published test vector
	body := []byte(`{"test": 2432232314}`)
	got := Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
	two := Sign([][]byte{key, key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
	if two != got+" "+got {
		t.Errorf("two keys: %s", two)
	}
}

func TestSealerKeepsSecretsOfTheirEndpoint(t *testing.T) {
	key := make([]byte, 32)
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	_, raw := NewSecret()
	sealed := s.Seal("we_a", raw)
	if strings.Contains(sealed, base64.StdEncoding.EncodeToString(raw)) {
		t.Fatal("sealed secret holds the secret in clear")
	}
	if got, err := s.Open("we_a", sealed); err != nil || string(got) != string(raw) {
		t.Errorf("open: %v", err)
	}
	if _, err := s.Open("we_b", sealed); err == nil {
		t.Error("a sealed secret opened for another endpoint")
	}
	other, _ := NewSealer(append(make([]byte, 31), 1))
	if _, err := other.Open("we_a", sealed); err == nil {
		t.Error("a sealed secret opened with another key")
	}
}

func TestKeyFileOutsideTheDataDirectory(t *testing.T) {
	data := t.TempDir()
	if _, err := LoadKeyFile(filepath.Join(data, "k"), data, true); err == nil {
		t.Error("a key file inside the data directory was accepted")
	}
	path := filepath.Join(t.TempDir(), "k")
	if _, err := LoadKeyFile(path, data, false); err == nil {
		t.Error("a missing key file was accepted without --webhooks-generate-key")
	}
	k1, err := LoadKeyFile(path, data, true)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadKeyFile(path, data, true)
	if err != nil || string(k1) != string(k2) {
		t.Errorf("the generated key did not read back: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode())
	}
}

// Deliveries go to globally reachable unicast addresses only: every special-purpose range of
// the IANA registries is refused, with the IPv4 address an IPv6 form embeds judged as itself.
func TestRefusedAddresses(t *testing.T) {
	for a, want := range map[string]bool{
		"127.0.0.1": true, "::1": true, "10.0.0.1": true, "172.16.5.4": true, "192.168.1.1": true,
		"169.254.169.254": true, "fe80::1": true, "fd00:ec2::254": true, "100.64.0.1": true, "0.0.0.0": true,
		"100.100.100.200": true, "::ffff:127.0.0.1": true, "::": true,
		// The special-purpose ranges an earlier filter let through.
		"0.1.2.3": true, "198.18.0.1": true, "198.19.255.254": true, "192.0.0.8": true, "240.0.0.1": true,
		"255.255.255.255": true, "64:ff9b::10.0.0.1": true, "64:ff9b::127.0.0.1": true,
		"2002:7f00:1::": true, "2002:a00:1::1": true, "::127.0.0.1": true, "::8.8.8.8": true, "fec0::1": true,
		// Documentation, benchmarking, reserved and other ranges.
		"192.0.2.1": true, "198.51.100.7": true, "203.0.113.9": true, "192.88.99.1": true, "224.0.0.1": true,
		"2001:db8::1": true, "3fff::1": true, "2001::1": true, "100::1": true, "64:ff9b:1::1": true,
		"5f00::1": true, "ff02::1": true, "fc00::1": true, "4000::1": true,
		// Globally reachable.
		"8.8.8.8": false, "1.1.1.1": false, "2001:4860:4860::8888": false, "2606:4700:4700::1111": false,
		"64:ff9b::8.8.8.8": false, "2002:808:808::1": false, "::ffff:8.8.8.8": false, "100.63.255.255": false,
		"100.128.0.1": false, "198.20.0.1": false, "192.0.1.1": false,
	} {
		if got := refused(netip.MustParseAddr(a)); got != want {
			t.Errorf("refused(%s) = %v, want %v", a, got, want)
		}
	}
}

// The address is checked when connecting, after resolution: a delivery to a loopback
// receiver fails without --webhooks-allow-private even though the URL passed no check.
func TestConnectionsToRefusedAddressesFail(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	a := post(context.Background(), newClient(false, time.Second, 1, 1), srv.URL, "id", []byte("{}"), [][]byte{{1}}, time.Second, 1<<10)
	if a.Error == "" || outcome(a) != "refused" || hits != 0 {
		t.Errorf("attempt %+v (outcome %s), %d requests received", a, outcome(a), hits)
	}
	a = post(context.Background(), newClient(true, time.Second, 1, 1), srv.URL, "id", []byte("{}"), [][]byte{{1}}, time.Second, 1<<10)
	if a.Error != "" || hits != 1 {
		t.Errorf("with private addresses allowed: %+v", a)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	a := post(context.Background(), newClient(true, time.Second, 1, 1), srv.URL, "id", []byte("{}"), [][]byte{{1}}, time.Second, 1<<10)
	if a.Status != http.StatusFound || a.Error == "" {
		t.Errorf("attempt %+v", a)
	}
}

func TestCheckURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://8.8.8.8/hook": true, "http://8.8.8.8/hook": false, "https://127.0.0.1/": false, "https://203.0.113.9/hook": false,
		"ftp://8.8.8.8/": false, "https://u:p@8.8.8.8/": false, "not a url": false,
	} {
		err := CheckURL(context.Background(), raw, false)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrURLRefused)) {
			t.Errorf("CheckURL(%q) = %v", raw, err)
		}
	}
	if err := CheckURL(context.Background(), "http://127.0.0.1:9/", true); err != nil {
		t.Errorf("with private addresses allowed: %v", err)
	}
}

func TestParseSchedule(t *testing.T) {
	got, err := ParseSchedule("0s, 5s,5m")
	if err != nil || len(got) != 3 || got[2] != 5*time.Minute {
		t.Errorf("%v, %v", got, err)
	}
	for _, bad := range []string{"", "5s,-1s", "soon"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

// A delivery stream is compacted after lease.CompactAfter checkpoints: it is deleted and starts again
// with the last checkpoint, which the next runner reads (and reads from the backup when the
// compaction died with the stream deleted).
func TestCheckpointsAreCompacted(t *testing.T) {
	store, err := sqlite.Open(t.TempDir(), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.SingleNode = true
	s := &Service{Store: store, Feed: store, Config: &cfg, Node: "n"}
	r := s.newRunner("we_x")
	r.held.Expected = eventstore.NoStream
	for i := range lease.CompactAfter + 5 {
		r.cp.DeadRead = uint64(i)
		if err := r.save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, err := range store.ReadStream(ctx, deliveryPrefix+"we_x", eventstore.ReadStreamOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	cp, _, found, err := s.checkpoint(ctx, "we_x")
	if n != 6 || !found || err != nil || cp.DeadRead != lease.CompactAfter+4 {
		t.Errorf("%d checkpoints in the stream; last %+v, %v", n, cp, err)
	}
	// A compaction that died after the delete: the backup stands in.
	ev, _ := newEvent(TypeCheckpoint, Checkpoint{DeadRead: 7})
	store.Append(ctx, backupPrefix+"we_x", eventstore.Any, ev)
	store.DeleteStream(ctx, deliveryPrefix+"we_x", eventstore.Any)
	cp, expected, found, err := s.checkpoint(ctx, "we_x")
	if !found || err != nil || cp.DeadRead != 7 || !expected.IsNoStream() {
		t.Errorf("after a compaction died: %+v %v %v %v", cp, expected, found, err)
	}
}

// A receiver's answer with more than 16 KiB of headers is a failed attempt, its headers never
// held by this process: Go's default would read 10 MiB of each.
func TestHugeAnswerHeadersFailTheAttempt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 64 {
			w.Header().Set(fmt.Sprint("X-Big-", i), strings.Repeat("a", 1<<10))
		}
	}))
	defer srv.Close()
	a := post(context.Background(), newClient(true, time.Second, 1, 1), srv.URL, "id", []byte("{}"), [][]byte{{1}}, time.Second, 1<<10)
	if a.Error == "" || a.Status != 0 || !strings.Contains(a.Error, "headers exceeded") {
		t.Errorf("attempt %+v; want it failed for its headers", a)
	}
}

// The same bound holds over HTTP/2, which an https receiver negotiates: its header list may
// carry 16 KiB too, so a megabyte header fails the attempt (a retry, as any failure) where
// Go's default list of 10 MiB would take it whole and call the attempt a success.
func TestHugeAnswerHeadersFailTheAttemptOverHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 1<<20))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := newClient(true, time.Second, 1, 1)
	client.Transport.(*http.Transport).TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
	a := post(context.Background(), client, srv.URL, "id", []byte("{}"), [][]byte{{1}}, time.Second, 1<<10)
	if a.Error == "" || a.Status != 0 || !strings.Contains(a.Error, "connection error") {
		t.Errorf("attempt %+v; want it failed for its headers", a)
	}
}

// An attempt answered with a megabyte of headers is a failed attempt like any other: the
// delivery is sent again, with the same webhook-id, as the retry schedule says, and the order's
// later events follow once the receiver answers plainly.
func TestHugeAnswerHeadersAreRetried(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if ids = append(ids, r.Header.Get("webhook-id")); len(ids) == 1 {
			w.Header().Set("X-Big", strings.Repeat("a", 1<<20))
		}
	}))
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Schedule, cfg.AllowPrivate, cfg.SingleNode = []time.Duration{0, 10 * time.Millisecond}, true, true
	store := openStore(t)
	sealer, _ := NewSealer(make([]byte, 32))
	s := &Service{Store: store, Feed: store, Config: &cfg, Node: "n", Log: slog.New(slog.DiscardHandler),
		Endpoints: &Endpoints{Store: store, Sealer: sealer, Config: &cfg, Now: time.Now}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	if _, err := register(ctx, s.Endpoints, "shop", "key-huge", srv.URL+"/hook", []string{AllEvents}, ""); err != nil {
		t.Fatal(err)
	}
	go func() { s.Run(ctx); close(done) }()
	appendShopOrders(t, store, 0, 5) // one order of 5 events
	eventually(t, "the order's 5 events delivered after one retry", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) >= 6
	})
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 6 || ids[0] != ids[1] || len(slices.Compact(slices.Clone(ids))) != 5 {
		t.Errorf("webhook-ids received %q; want the first sent again, then the other four", ids)
	}
}
