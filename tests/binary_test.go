package tests

import (
	"debug/buildinfo"
	"testing"
)

// The server links no module that only tests need: go-cmp's diffs are for test failures (its
// output is unstable by design), and what a binary links it ships.
func TestBinaryLinksNoTestOnlyModule(t *testing.T) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range info.Deps {
		if m.Path == "github.com/google/go-cmp" {
			t.Errorf("the server binary links %s %s", m.Path, m.Version)
		}
	}
}
