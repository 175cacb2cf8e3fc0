package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// decode reads a JSON body strictly into v, a pointer to a request body struct: one object,
// known fields only, each named exactly as its tag and at most once, right types, text that is
// text. The key's fingerprint is taken from the body as written (idempotency.Fingerprint), so
// decode refuses whatever encoding/json would read otherwise: it matches names regardless of
// case and keeps the last of two, so {"amount":1,"AMOUNT":2} and {"AMOUNT":2,"amount":1},
// one canonical form, were two commands; and it turns invalid UTF-8 and escaped lone
// surrogates into U+FFFD.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: a JSON body is required", errMalformed)
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: the body is not valid UTF-8", errMalformed)
	}
	// Unmarshal refuses anything after the value too; unknown names are names' to refuse.
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	// The body is valid JSON of v's type from here on.
	w := names{b: body}
	if err := w.value(reflect.TypeOf(v).Elem()); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	if err := checkSurrogates(body); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	return nil
}

// names walks valid JSON, already decoded into a value of the type it is walked as, and checks
// that every member of an object decoded into a struct is named exactly as one of its fields,
// at most once. It works on the bytes: json.Decoder.Token took seven times as long as the
// decoding itself. Body structs have fewer than 64 fields.
type names struct {
	b []byte
	i int
}

func (w *names) value(t reflect.Type) error {
	w.space()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case w.b[w.i] == '{' && t.Kind() == reflect.Struct:
		return w.object(t)
	case w.b[w.i] == '[' && t.Kind() == reflect.Slice:
		return w.array(t.Elem())
	}
	w.skip()
	return nil
}

func (w *names) object(t reflect.Type) error {
	var seen uint64
	w.i++ // {
	for w.space(); w.b[w.i] != '}'; w.space() {
		if w.b[w.i] == ',' {
			w.i++
			w.space()
		}
		name := w.name()
		i := fieldNamed(t, name)
		switch {
		case i < 0:
			return fmt.Errorf("unknown field %q (names are case-sensitive)", name)
		case seen&(1<<i) != 0:
			return fmt.Errorf("field %q appears more than once", name)
		}
		seen |= 1 << i
		w.space()
		w.i++ // :
		if err := w.value(t.Field(i).Type); err != nil {
			return err
		}
	}
	w.i++ // }
	return nil
}

func (w *names) array(elem reflect.Type) error {
	w.i++ // [
	for w.space(); w.b[w.i] != ']'; w.space() {
		if w.b[w.i] == ',' {
			w.i++
		}
		if err := w.value(elem); err != nil {
			return err
		}
	}
	w.i++ // ]
	return nil
}

// name reads a member's name: a string, decoded if it has escapes.
func (w *names) name() []byte {
	start := w.i
	escaped := w.str()
	raw := w.b[start:w.i]
	if !escaped {
		return raw[1 : len(raw)-1]
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON
	return []byte(s)
}

// str skips a string and reports whether it has escapes.
func (w *names) str() (escaped bool) {
	for w.i++; w.b[w.i] != '"'; w.i++ {
		if w.b[w.i] == '\\' {
			escaped = true
			w.i++
		}
	}
	w.i++
	return escaped
}

// skip skips a value that holds no member to check: a string, number, true, false or null.
// (A container where the type has none was refused by the decoding; skipped all the same.)
func (w *names) skip() {
	depth := 0
	for w.i < len(w.b) {
		switch c := w.b[w.i]; {
		case c == '"':
			w.str()
			if depth == 0 {
				return
			}
			continue
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return
			}
			if depth--; depth == 0 {
				w.i++
				return
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			return
		}
		w.i++
	}
}

func (w *names) space() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\r' || w.b[w.i] == '\n') {
		w.i++
	}
}

// fieldNamed is the index of the field of struct t whose JSON name is exactly name, or -1.
func fieldNamed(t reflect.Type, name []byte) int {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		if f.IsExported() && tag != "-" && tag == string(name) {
			return i
		}
	}
	return -1
}

var errLoneSurrogate = errors.New("a string escapes half of a UTF-16 surrogate pair (\\ud800 to \\udfff) without the other half")

// checkSurrogates refuses an escaped lone surrogate in valid JSON, where every backslash
// starts an escape within a string.
func checkSurrogates(body []byte) error {
	for i := bytes.IndexByte(body, '\\'); i >= 0 && i+1 < len(body); {
		next := i + 2 // past a two-character escape
		if body[i+1] == 'u' {
			r := hex4(body[i+2:])
			next = i + 6
			switch {
			case r >= 0xdc00 && r <= 0xdfff:
				return errLoneSurrogate
			case r >= 0xd800 && r <= 0xdbff:
				if len(body) < next+6 || body[next] != '\\' || body[next+1] != 'u' {
					return errLoneSurrogate
				}
				if low := hex4(body[next+2:]); low < 0xdc00 || low > 0xdfff {
					return errLoneSurrogate
				}
				next += 6
			}
		}
		j := bytes.IndexByte(body[next:], '\\')
		if j < 0 {
			return nil
		}
		i = next + j
	}
	return nil
}

// hex4 is the value of the four hexadecimal digits b starts with (valid JSON has them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}
