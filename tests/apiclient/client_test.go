package apiclient_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedClientIsCurrent generates the client again, with the go:generate command of
// generate.go, and fails if it differs from the committed one: a change to the document must
// come with the client it generates, so that the end-to-end test drives the document as it is.
func TestGeneratedClientIsCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "client.gen.go")
	gen := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", out, "../../api/openapi.yaml")
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", gen, err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("client.gen.go is not what api/openapi.yaml generates: run go generate ./tests/apiclient")
	}
}
