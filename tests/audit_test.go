package tests

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/orders/eventstore/sqlite"
)

// runAPI runs the binary with args and returns its output and exit code.
func runAPI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(binary, args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("api %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

// An auditor's tools over the real binary: state at a revision over HTTP, then history,
// state and verify on the data directory, clean and after tampering with the log and with a
// lookup.
func TestAuditTools(t *testing.T) {
	s := startServer(t, "")
	id, _ := s.create(t, "audit-create", "c-audit")
	s.command(t, id, "/payments", "audit-pay", map[string]any{"paymentId": "pay-a", "amount": orderTotal})
	s.command(t, id, "/payments/pay-a/confirm", "audit-confirm", map[string]any{"amount": orderTotal})

	r := s.do(t, "GET", "/v1/orders/"+id+"/state?revision=1", "", nil)
	wantStatus(t, r, http.StatusOK)
	if got := r.num("revision"); got != 1 {
		t.Fatalf("state at revision 1 stops at %d", got)
	}
	if st, _ := r.json["order"].(map[string]any); st["status"] != "created" {
		t.Fatalf("state at revision 1 is %v, want created", st["status"])
	}
	s.current().stop(t)

	out, code := runAPI(t, "audit", "history", id, "--data", s.dir, "--format", "jsonl")
	if code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("history: exit %d, %d lines:\n%s", code, strings.Count(out, "\n"), out)
	}
	out, code = runAPI(t, "audit", "state", id, "--data", s.dir, "--revision", "2", "--format", "json")
	if code != 0 || !strings.Contains(out, `"revision": 2`) || !strings.Contains(out, `"id": "`+id+`"`) {
		t.Fatalf("state: exit %d:\n%s", code, out)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	out, code = runAPI(t, "audit", "verify", "--data", s.dir, "--report", report)
	if code != 0 || !strings.Contains(out, "no findings") {
		t.Fatalf("verify of a clean store: exit %d:\n%s", code, out)
	}

	// Flip one byte of the confirmed payment's data in the file.
	db, err := sqlite.OpenDB(filepath.Join(s.dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE events SET data = CAST(replace(CAST(data AS TEXT), 'pay-a', 'pay-b') AS BLOB)
		WHERE type = 'order.payment-confirmed.v1'`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("tamper: %v, %d rows", err, n)
	}
	db.Close()
	// Point the payment's lookup at another order, in the read models' file.
	rm, err := sqlite.OpenDB(filepath.Join(s.dir, "readmodels.db"))
	if err != nil {
		t.Fatal(err)
	}
	var payments string
	if err := rm.QueryRow(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'payments_g%'`).Scan(&payments); err != nil {
		t.Fatal(err)
	}
	res, err = rm.Exec(`UPDATE ` + payments + ` SET order_id = 'elsewhere' WHERE payment_id = 'pay-a'`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("tamper with the payments lookup: %v, %d rows", err, n)
	}
	rm.Close()
	out, code = runAPI(t, "audit", "verify", "--data", s.dir, "--report", report)
	if code == 0 || !strings.Contains(out, "tampered order-"+id+"@3") || !strings.Contains(out, "drift order-"+id+"@2") {
		t.Fatalf("verify after tampering: exit %d, want findings naming order-%s@3 (the event) and @2 (the payment's lookup):\n%s", code, id, out)
	}
	if data, err := os.ReadFile(report); err != nil || !strings.Contains(string(data), `"kind": "tampered"`) {
		t.Fatalf("report: %v\n%s", err, data)
	}
}
