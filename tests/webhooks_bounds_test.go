package tests

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// One client's receivers cannot take the node's memory or its file descriptors. 30 of its
// endpoints answer with 9 MiB of headers, 150 accept and never answer; during a burst of its
// creates the server's anonymous memory grows by less than 64 MB (eight times that in a race
// build, whose every allocation has its shadow: without the bounds it grows by gigabytes), the descriptors it holds beyond those it held
// before stay within the deliveries' budget (twice --webhooks-attempts) and the connections of
// this test, and another client's requests are answered throughout.
func TestHostileReceiversAreBounded(t *testing.T) {
	t.Parallel()
	const attempts = 32
	huge := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for i := range 9 {
			w.Header().Set("X-Big-"+strconv.Itoa(i), strings.Repeat("a", 1<<20))
		}
	})}
	hugeURL := serveOn(t, huge)
	hang := hangingListener(t)

	s := startServer(t, "", append(webhookPacing(t, "0s,50ms,100ms", "3s", "10s"),
		"--keys-file", accessKeysFile(t), "--webhooks-attempts", strconv.Itoa(attempts))...)
	for i := range 180 {
		url := hugeURL + "/hook"
		if i >= 30 {
			url = "http://" + hang + "/hook"
		}
		s.register(t, alice, fmt.Sprint("hostile-", i), fmt.Sprintf("%s?n=%d", url, i))
	}
	pid := s.current().cmd.Process.Pid
	memBefore, fdsBefore := anonKiB(pid), openFiles(pid)

	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() { s.ok(t, alice, 201, "POST", "/v1/orders", fmt.Sprint("burst-", i), orderFor("c-burst")) })
	}
	memMax, fdsMax, slowest := memBefore, fdsBefore, time.Duration(0)
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); {
		start := time.Now()
		s.ok(t, bob, 200, "GET", "/v1/orders", "", nil)
		slowest = max(slowest, time.Since(start))
		memMax, fdsMax = max(memMax, anonKiB(pid)), max(fdsMax, openFiles(pid))
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("anonymous memory %d → at most %d KiB; descriptors %d → at most %d; another client's slowest answer %v",
		memBefore, memMax, fdsBefore, fdsMax, slowest)
	limit := 64 << 10
	if raceEnabled {
		limit *= 8
	}
	if memBefore < 0 || memMax-memBefore > limit {
		t.Errorf("anonymous memory grew by %d KiB; want less than %d", memMax-memBefore, limit)
	}
	if fdsMax-fdsBefore > 2*attempts+64 { // 64: this test's own connections, and the store's
		t.Errorf("descriptors grew by %d; want at most %d for the deliveries", fdsMax-fdsBefore, 2*attempts)
	}
	if slowest > 5*time.Second {
		t.Errorf("another client waited %v for an answer", slowest)
	}
}

// serveOn serves srv on a loopback port until the test ends and returns its base URL.
func serveOn(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// hangingListener accepts connections on a loopback port and never answers them, until the
// test ends; it returns the address.
func hangingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String()
}
