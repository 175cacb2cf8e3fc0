//go:build linux

package tests

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/acme/orders/tests/load"
)

// The disk fills up under the server: a command fails with a 503 unavailable problem and
// leaves nothing half written; reads keep working; when space returns the server takes
// commands again without a restart, and the failed commands, retried with their keys, run
// once.
//
// Two ways to fill the disk, because they fail differently inside SQLite:
//   - rlimit: RLIMIT_FSIZE on the server process (prlimit), so that no write may grow a file.
//     The write fails with EFBIG (SQLITE_IOERR_WRITE), after a SIGXFSZ that the Go runtime
//     ignores unless the program asks for it. It needs no privilege and works anywhere.
//   - tmpfs: a small tmpfs as the data directory, filled with a ballast file: a real ENOSPC
//     (SQLITE_FULL). It needs CAP_SYS_ADMIN (CI runs as root) and is skipped without it.
//
// Making the data directory read-only does not work: root ignores file permissions, and the
// server's open files stay writable whoever runs it.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	t.Run("rlimit", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "", "--key-lease", "1s", "--key-wait", "500ms")
		pid := s.current().cmd.Process.Pid
		var old syscall.Rlimit
		if err := prlimit(pid, syscall.RLIMIT_FSIZE, nil, &old); err != nil {
			t.Fatalf("prlimit: %v", err)
		}
		diskFull(t, s,
			func() {
				// No file may grow past a byte; the hard limit stays, so that any user may
				// raise the soft one again.
				if err := prlimit(pid, syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1, Max: old.Max}, nil); err != nil {
					t.Fatalf("prlimit: %v", err)
				}
			},
			func() {
				if err := prlimit(pid, syscall.RLIMIT_FSIZE, &old, nil); err != nil {
					t.Fatalf("prlimit: %v", err)
				}
			})
	})
	t.Run("tmpfs", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
			t.Skipf("cannot mount a tmpfs (%v): needs CAP_SYS_ADMIN", err)
		}
		// Registered before the server starts, so that it runs after the server stopped.
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
		s := startServer(t, filepath.Join(dir, "data"), "--key-lease", "1s", "--key-wait", "500ms")
		ballast := filepath.Join(dir, "ballast")
		diskFull(t, s,
			func() {
				f, err := os.Create(ballast)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				chunk := make([]byte, 64<<10)
				for {
					if _, err := f.Write(chunk); err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("fill the tmpfs: %v", err)
						}
						return
					}
				}
			},
			func() {
				if err := os.Remove(ballast); err != nil {
					t.Fatal(err)
				}
			})
	})
}

// diskFull runs the scenario on s: fill makes the disk full, free gives the space back.
func diskFull(t *testing.T, s *server, fill, free func()) {
	id, _ := s.create(t, "before-full", "c-full")
	before := s.command(t, id, "/lines", "before-full-line", line{SKU: "sku-2", Quantity: 1, UnitPrice: 500})
	fill()

	// The store may still have room in files it already holds (the WAL is reused after a
	// checkpoint): send new orders until one fails.
	var failed request
	var acked []*response
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		if i == 2000 || time.Now().After(deadline) {
			t.Fatalf("%d creates after the disk filled up, none refused", i)
		}
		req := request{method: "POST", path: "/v1/orders", key: fmt.Sprintf("full-%d", i), body: orderFor(fmt.Sprintf("c-full-%d", i))}
		r, err := s.send(t, req)
		if err != nil {
			t.Fatalf("the server did not answer a command on a full disk: %v", err)
		}
		if r.status/100 == 2 {
			acked = append(acked, r)
			continue
		}
		checkProblem(t, r, http.StatusServiceUnavailable, "unavailable")
		failed = req
		t.Logf("after %d more creates: %v", i, r)
		break
	}

	// A command on an existing order fails too, and the order is as it was.
	addReq := request{method: "POST", path: "/v1/orders/" + id + "/lines", key: "full-line", body: line{SKU: "sku-3", Quantity: 2, UnitPrice: 300}}
	add, err := s.send(t, addReq)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	addFailed := add.status == http.StatusServiceUnavailable
	if addFailed {
		checkProblem(t, add, http.StatusServiceUnavailable, "unavailable")
	} else {
		t.Logf("the add-line was taken on the full disk: %v", add)
		wantStatus(t, add, http.StatusOK)
	}
	// The order's events need no space to be read. Its read model may be behind, its
	// projection failing to write: then the read is a 503, never a 500.
	if o := s.do(t, "GET", "/v1/orders/"+id, "", nil); o.status != http.StatusOK {
		checkProblem(t, o, http.StatusServiceUnavailable, "unavailable")
	}
	if evs := s.events(t, id); addFailed && int64(len(evs)) != before.num("version") {
		t.Errorf("after a refused add-line: order %s has events %v; want %d, as before", id, types(evs), before.num("version"))
	}
	if r := s.do(t, "GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("healthz on a full disk: %v", r)
	}

	free()
	// The projections retry with a backoff: reads come back by themselves.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		o := s.do(t, "GET", "/v1/orders/"+id, "", nil)
		if o.status == http.StatusOK {
			break
		}
		checkProblem(t, o, http.StatusServiceUnavailable, "unavailable")
		if time.Since(start) > 30*time.Second {
			t.Fatalf("reads still fail 30s after the disk had room again: %v", o)
		}
	}

	// The failed commands, retried with their keys, run now, once: nothing of the first try
	// was kept (a 503 is not stored).
	retry := func(req request, status int) *response {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, _, err := s.sendSettled(t, req, deadline)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
				wantStatus(t, r, status)
				return r
			}
			time.Sleep(100 * time.Millisecond) // still recovering
		}
	}
	created := retry(failed, http.StatusCreated)
	checkFirst(t, created)
	newID := createdID(t, created)
	if evs := s.events(t, newID); count(evs, "order.created.v2", "", "") != 1 || int64(len(evs)) != created.num("version") {
		t.Errorf("order %s, created after the disk had room again, has events %v", newID, types(evs))
	}
	if addFailed {
		r := retry(addReq, http.StatusOK)
		checkFirst(t, r)
		if r.num("version") != before.num("version")+1 {
			t.Errorf("the add-line retried after the disk had room again: %v; want version %d", r, before.num("version")+1)
		}
	}
	evs := s.events(t, id)
	if count(evs, "order.line-added.v2", "sku", "sku-3") != 1 || count(evs, "order.line-added.v2", "sku", "sku-2") != 1 {
		t.Errorf("order %s has events %v; want sku-2 and sku-3 added once each", id, types(evs))
	}

	// What was acknowledged on the full disk is there.
	for _, r := range acked {
		aid := createdID(t, r)
		if evs := s.events(t, aid); count(evs, "order.created.v2", "", "") != 1 {
			t.Errorf("order %s, acknowledged while the disk filled up, has events %v", aid, types(evs))
		}
	}
	// And new commands run.
	s.create(t, "after-full", "c-after-full")
	if p := s.current(); p.done() {
		t.Fatalf("the server exited: %v", p.err)
	}
	if log := s.current().stderr.String(); load.Panicked([]byte(log)) {
		t.Errorf("the server logged a panic:\n%s", tail(log, 8<<10))
	}
}

// prlimit sets (if limit is not nil) and reads (if old is not nil) a resource limit of process
// pid: prlimit(2), which package syscall only uses for its own process.
func prlimit(pid, resource int, limit, old *syscall.Rlimit) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource),
		uintptr(unsafe.Pointer(limit)), uintptr(unsafe.Pointer(old)), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// Readiness reflects that writes fail on a full disk even when nothing else has tried to write
// since it filled (the read models caught up, no sweep due): 503 while full, and 200 again by
// itself once space returns, with no command needed to find out.
func TestReadinessSeesAFullDisk(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	s.create(t, "ready-create", "c-ready")
	s.waitProjections(t, "caught up", caughtUp)
	wantStatus(t, s.do(t, "GET", "/readyz", "", nil), http.StatusOK)
	pid := s.current().cmd.Process.Pid
	var old syscall.Rlimit
	if err := prlimit(pid, syscall.RLIMIT_FSIZE, nil, &old); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	if err := prlimit(pid, syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 1, Max: old.Max}, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	checkProblem(t, s.do(t, "GET", "/readyz", "", nil), http.StatusServiceUnavailable, "unavailable")
	if err := prlimit(pid, syscall.RLIMIT_FSIZE, &old, nil); err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	if !eventually(10*time.Second, func() bool { return s.do(t, "GET", "/readyz", "", nil).status == http.StatusOK }) {
		t.Error("readyz once space returned: still not 200 after 10 s")
	}
}
