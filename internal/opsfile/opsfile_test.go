package opsfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read refuses a file over its limit; Decode refuses unknown fields and anything after the value.
func TestReadAndDecode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(path, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(path, 7); string(data) != `{"a":1}` || err != nil {
		t.Errorf("Read at the limit: %q, %v", data, err)
	}
	if _, err := Read(path, 6); err == nil || !strings.Contains(err.Error(), "larger than 6 bytes") {
		t.Errorf("Read over the limit: %v", err)
	}
	var v struct{ A int }
	for data, want := range map[string]string{`{"a":1}`: "", `{"a":1}{}`: "more after", `{"b":1}`: "unknown field", `{"a":`: "EOF"} {
		err := Decode([]byte(data), &v)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Decode(%s): %v; want %q", data, err, want)
		}
	}
}
