package eventstore_test

import (
	"bufio"
	stdjson "encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/orders/eventstore"
	gojson "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// FuzzValidJSON holds ValidateAppend's validator (github.com/goccy/go-json's Valid) to the
// contract it replaced, encoding/json.Valid: the same verdict on every input. Seeds: the JSON
// test suite's hard cases below, and the bodies of the API's and the fingerprint's fuzz
// corpora (api/testdata/fuzz, idempotency/testdata/fuzz).
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `null`, `true`, `tru`, `1`, `-0`, `-`, `[-]`, `[-.123]`, `01`, `1.`, `.1`, `1e`, `1e+`,
		`1E-7`, `-0.0e0`, `1e999`, `"`, `"\u12"`, `"\uD800"`, `"\uDC00\uD800"`, `"\x"`, `"\/"`, "\"\x01\"",
		"\"\x7f\"", "\"\xff\"", "\"\xed\xa0\x80\"", "\xef\xbb\xbf{}", `{"a" 1}`, `{"a":1,}`, `[1,]`, `[1 2]`,
		`{"a":1}x`, `{"a":1}}`, `{"a":1} `, "\t{\"a\":\n1}\r", `{a:1}`, `{'a':1}`, `[NaN]`, `[Infinity]`,
		`{"a":{"b":[1,{"c":null}]}}`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10000), `{"a":1}{"b":2}`, "\x00", `"a\u0000b"`,
	} {
		f.Add([]byte(s))
	}
	for _, dir := range []string{"../api/testdata/fuzz/FuzzCommandBody", "../idempotency/testdata/fuzz/FuzzFingerprint"} {
		for _, body := range corpusBytes(f, dir) {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if std, goccy := stdjson.Valid(b), gojson.Valid(b); std != goccy {
			t.Fatalf("Valid(%q): encoding/json says %v, goccy/go-json %v", b, std, goccy)
		}
	})
}

// corpusBytes returns the []byte values of the fuzz corpus files in dir.
func corpusBytes(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("corpus %s: %v (%d files)", dir, err, len(files))
	}
	var out [][]byte
	for _, name := range files {
		file, err := os.Open(name)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
				if err != nil {
					tb.Fatalf("%s: %v", name, err)
				}
				out = append(out, []byte(s))
			}
		}
		file.Close()
	}
	return out
}

// BenchmarkValidateAppend checks the events of a keyed create as the embedded store does
// before it appends them: the order's event and its metadata.
func BenchmarkValidateAppend(b *testing.B) {
	md := []byte(`{"principal":"local","correlationId":"HVQ4TZ4XBJXH3SZ2G6YMLR6QKM","causationId":"","idempotencyKey":"create-000123","fingerprint":"9c1185a5c5e9fc54612808977ee8f548b2258d31c2e8ac4c2e6e3d7e6b9a0c1d"}`)
	events := []eventstore.EventData{{ID: uuid.New(), Type: "order.created.v1", Metadata: md,
		Data: []byte(`{"orderId":"01JDZ0000000000000000000AB","customerId":"c-000123","currency":"EUR","lines":[{"sku":"sku-1","name":"","quantity":2,"unitPrice":{"amount":1000,"currency":"EUR"}},{"sku":"sku-2","name":"","quantity":1,"unitPrice":{"amount":500,"currency":"EUR"}}],"channel":"","createdAt":"2026-12-02T01:00:00.123456789Z"}`)}}
	b.ReportAllocs()
	for b.Loop() {
		if err := eventstore.ValidateAppend("order-01JDZ0000000000000000000AB", events); err != nil {
			b.Fatal(err)
		}
	}
}
