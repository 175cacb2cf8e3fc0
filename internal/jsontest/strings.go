// Package jsontest gives tests of stored formats (hashes, ids, fingerprints) the strings that
// exercise every escape of encoding/json.
package jsontest

import "math/rand/v2"

// Strings returns strings that exercise every escape of encoding/json (quotes, backslashes,
// control bytes, HTML characters, U+2028 and U+2029, multi-byte runes, invalid UTF-8), then n
// random ones made of such pieces.
func Strings(r *rand.Rand, n int) []string {
	out := []string{"", "plain", `q"uote`, `back\slash`, "<a href='x'>&amp;</a>", "line\nfeed\r\t\b\f\x00\x1f\x7f",
		"\u2028\u2029", "é€𝄞", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "ü\u2028<"}
	pieces := []string{"a", "Z", "0", " ", `"`, `\`, "<", ">", "&", "\n", "\x01", "\x7f", "é", "\u2028", "\u2029", "𝄞", "\xff", "\xc3", "/", "'"}
	for range n {
		var b []byte
		for range r.IntN(12) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		out = append(out, string(b))
	}
	return out
}
