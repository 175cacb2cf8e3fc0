package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeService answers the admin API's projection status, as a service whose projections are
// both caught up, and records every request. It refuses the key "wrong" as the service does.
type fakeService struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct{ method, path, auth string }

const statusBody = `{"projections":[` +
	`{"name":"orders","state":"running","error":"","generation":1,"checkpoint":7,"head":7,"lagEvents":0,"lagSeconds":0,"version":2},` +
	`{"name":"lookups","state":"running","error":"","generation":1,"checkpoint":7,"head":7,"lagEvents":0,"lagSeconds":0,"version":2}]}`

func newFakeService(t *testing.T) *fakeService {
	f := &fakeService{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{r.Method, r.URL.Path, r.Header.Get("Authorization")})
		f.mu.Unlock()
		switch {
		case r.Header.Get("Authorization") == "Bearer wrong":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"type":"/problems/unauthorized","title":"Unauthorized","status":401,"detail":"unknown API key"}`))
		case r.Method == http.MethodGet && r.URL.Path == "/admin/projections":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(statusBody))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeService) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

func (f *fakeService) lastAuth() string {
	seen := f.requests()
	if len(seen) == 0 {
		return ""
	}
	return seen[len(seen)-1].auth
}

func TestAPIKeyFromEnvironmentOrFile(t *testing.T) {
	srv := newFakeService(t)
	file := filepath.Join(t.TempDir(), "admin-key")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    string // the Authorization header sent
		wantErr string
	}{
		{"environment", map[string]string{"API_KEY": "from-env"}, nil, "Bearer from-env", ""},
		{"file", nil, []string{"--api-key-file", file}, "Bearer from-file", ""},
		{"file from the environment", map[string]string{"API_KEY_FILE": file}, nil, "Bearer from-file", ""},
		{"flag", nil, []string{"--api-key", "from-flag"}, "Bearer from-flag", ""},
		{"none", nil, nil, "", ""},
		{"both", map[string]string{"API_KEY": "from-env"}, []string{"--api-key-file", file}, "", "an API key is given twice"},
		{"empty file", nil, []string{"--api-key-file", empty}, "", "the API key in " + empty + " is empty"},
		{"missing file", nil, []string{"--api-key-file", empty + "-missing"}, "", "API key file: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.requests())
			args := append([]string{"projections", "status", "--url", srv.URL}, tc.args...)
			r := runCLIWith(t, cliInput{env: tc.env}, args...)
			if tc.wantErr != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
					t.Errorf("error %v; want %q", r.err, tc.wantErr)
				}
				if len(srv.requests()) != before {
					t.Error("a request was sent")
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := srv.lastAuth(); got != tc.want || len(srv.requests()) == before {
				t.Errorf("sent Authorization %q; want %q", got, tc.want)
			}
		})
	}
	help := runCLI(t, "projections", "status", "--help")
	if !strings.Contains(help.stdout, "Prefer API_KEY or --api-key-file") {
		t.Errorf("projections status --help:\n%s\nwant it to prefer API_KEY or --api-key-file", help.stdout)
	}
}

func TestProjectionsStatusFormats(t *testing.T) {
	srv := newFakeService(t)
	r := runCLI(t, "projections", "status", "--url", srv.URL)
	if r.err != nil || !strings.HasPrefix(r.stdout, "NAME") || !strings.Contains(r.stdout, "orders") || !strings.Contains(r.stdout, "lookups") {
		t.Errorf("table: %v\n%s", r.err, r.stdout)
	}
	// json is the service's own answer, every field of it.
	r = runCLI(t, "projections", "status", "--url", srv.URL, "--format", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got, want any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	json.Unmarshal([]byte(statusBody), &want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("json (-GET /admin/projections +printed):\n%s", d)
	}
}

func TestProjectionsRebuildNames(t *testing.T) {
	help := runCLI(t, "projections", "rebuild", "--help")
	if !strings.Contains(help.stdout, "(orders, lookups, sales)") {
		t.Errorf("projections rebuild --help:\n%s\nwant the projections' names", help.stdout)
	}
	srv := newFakeService(t)
	r := runCLI(t, "projections", "rebuild", "orders", "order", "--url", srv.URL)
	if r.err == nil || r.err.Error() != `no projection named "order": the service has orders, lookups` {
		t.Errorf("rebuild of an unknown projection: %v; want the error to list the projections", r.err)
	}
	for _, req := range srv.requests() {
		if req.method != http.MethodGet {
			t.Errorf("sent %s %s; want no rebuild started", req.method, req.path)
		}
	}
}

// Failures to reach the service, or refusals by it, name the flags and variables to change.
func TestAdminErrorsNameTheFlags(t *testing.T) {
	srv := newFakeService(t)
	r := runCLIWith(t, cliInput{env: map[string]string{"API_KEY": "wrong"}}, "projections", "status", "--url", srv.URL)
	if r.err == nil || r.err.Error() != "the service refused the API key (unknown API key): these commands need an admin's key, in API_KEY or --api-key-file" {
		t.Errorf("with a wrong key: %v", r.err)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	r = runCLI(t, "projections", "status", "--url", closed.URL)
	if r.err == nil || !strings.HasPrefix(r.err.Error(), "no answer from the service at "+closed.URL+" (--url or API_URL): ") {
		t.Errorf("with no service: %v", r.err)
	}
}
