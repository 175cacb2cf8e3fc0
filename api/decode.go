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
	// Names first: it stops at the first unknown one without reading the rest.
	if err := checkNames(json.NewDecoder(bytes.NewReader(body)), reflect.TypeOf(v).Elem()); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	// Unmarshal also refuses anything after the value.
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	if err := checkSurrogates(body); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	return nil
}

// checkNames reads the next JSON value from dec as one of type t: every member of an object
// read as a struct must be a field of it, by its exact JSON name, at most once. Other
// mismatches of types are left to json.Unmarshal. Body structs have fewer than 64 fields.
func checkNames(dec *json.Decoder, t reflect.Type) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	delim, ok := tok.(json.Delim)
	switch {
	case !ok:
		return nil // a string, number, bool or null
	case delim == '{' && t.Kind() == reflect.Struct:
		var seen uint64
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := tok.(string)
			i := fieldNamed(t, name)
			switch {
			case i < 0:
				return fmt.Errorf("unknown field %q (names are case-sensitive)", name)
			case seen&(1<<i) != 0:
				return fmt.Errorf("field %q appears more than once", name)
			}
			seen |= 1 << i
			if err := checkNames(dec, t.Field(i).Type); err != nil {
				return err
			}
		}
	case delim == '[' && t.Kind() == reflect.Slice:
		for dec.More() {
			if err := checkNames(dec, t.Elem()); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("a JSON %s where %s is expected", map[json.Delim]string{'{': "object", '[': "array"}[delim], kindName(t))
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// fieldNamed is the index of the field of struct t whose JSON name is exactly name, or -1.
func fieldNamed(t reflect.Type, name string) int {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		if f.IsExported() && tag != "-" && tag == name {
			return i
		}
	}
	return -1
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	}
	return "a number"
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
