package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeService answers the admin API's projection status, as a service whose projections are
// both caught up, and records the Authorization header of every request.
type fakeService struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

const statusBody = `{"projections":[` +
	`{"name":"orders","state":"running","error":"","generation":1,"checkpoint":7,"head":7,"lagEvents":0,"lagSeconds":0,"version":2},` +
	`{"name":"lookups","state":"running","error":"","generation":1,"checkpoint":7,"head":7,"lagEvents":0,"lagSeconds":0,"version":2}]}`

func newFakeService(t *testing.T) *fakeService {
	f := &fakeService{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.mu.Unlock()
		if r.Method != http.MethodGet || r.URL.Path != "/admin/projections" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(statusBody))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeService) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.auths)
}

func (f *fakeService) lastAuth() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.auths) == 0 {
		return ""
	}
	return f.auths[len(f.auths)-1]
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
			before := srv.requests()
			args := append([]string{"projections", "status", "--url", srv.URL}, tc.args...)
			r := runCLIWith(t, cliInput{env: tc.env}, args...)
			if tc.wantErr != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
					t.Errorf("error %v; want %q", r.err, tc.wantErr)
				}
				if srv.requests() != before {
					t.Error("a request was sent")
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := srv.lastAuth(); got != tc.want || srv.requests() == before {
				t.Errorf("sent Authorization %q; want %q", got, tc.want)
			}
		})
	}
	help := runCLI(t, "projections", "status", "--help")
	if !strings.Contains(help.stdout, "Prefer API_KEY or --api-key-file") {
		t.Errorf("projections status --help:\n%s\nwant it to prefer API_KEY or --api-key-file", help.stdout)
	}
}
