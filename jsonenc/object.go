package jsonenc

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Object appends the members of a JSON object to a buffer, in the order they are given, as
// encoding/json writes a struct's fields. Names are written as they are: they must be plain
// (no character that JSON escapes), as struct tags are. The first error (a time out of
// RFC 3339's range) is kept and returned by Close.
type Object struct {
	buf     []byte
	members int
	err     error
}

// Open starts an object at the end of dst.
func Open(dst []byte) Object {
	return Object{buf: append(dst, '{')}
}

func (o *Object) name(name string) {
	if o.members > 0 {
		o.buf = append(o.buf, ',')
	}
	o.members++
	o.buf = append(o.buf, '"')
	o.buf = append(o.buf, name...)
	o.buf = append(o.buf, '"', ':')
}

// String appends a string member.
func (o *Object) String(name, v string) {
	o.name(name)
	o.buf = String(o.buf, v)
}

// StringOmitEmpty appends a string member unless v is empty (omitempty).
func (o *Object) StringOmitEmpty(name, v string) {
	if v != "" {
		o.String(name, v)
	}
}

// Int appends an integer member.
func (o *Object) Int(name string, v int64) {
	o.name(name)
	o.buf = strconv.AppendInt(o.buf, v, 10)
}

// IntOmitEmpty appends an integer member unless v is 0 (omitempty).
func (o *Object) IntOmitEmpty(name string, v int64) {
	if v != 0 {
		o.Int(name, v)
	}
}

// Time appends a time member as time.Time.MarshalJSON writes it.
func (o *Object) Time(name string, t time.Time) {
	o.name(name)
	var err error
	if o.buf, err = Time(o.buf, t); err != nil && o.err == nil {
		o.err = err
	}
}

// Raw appends a member whose value write appends to the buffer, whole and valid.
func (o *Object) Raw(name string, write func([]byte) []byte) {
	o.name(name)
	o.buf = write(o.buf)
}

// StringMapOmitEmpty appends a map of strings, its keys sorted, unless it is empty (omitempty).
func (o *Object) StringMapOmitEmpty(name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	o.name(name)
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	o.buf = append(o.buf, '{')
	for i, k := range keys {
		if i > 0 {
			o.buf = append(o.buf, ',')
		}
		o.buf = String(o.buf, k)
		o.buf = append(o.buf, ':')
		o.buf = String(o.buf, m[k])
	}
	o.buf = append(o.buf, '}')
}

// Close ends the object and returns the buffer with it, or the first error.
func (o *Object) Close() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.buf, '}'), nil
}

// Time appends t as time.Time.MarshalJSON writes it: a quoted RFC 3339 time with its
// fraction of a second. A year outside 0 to 9999 is an error, as there.
func Time(dst []byte, t time.Time) ([]byte, error) {
	dst = append(dst, '"')
	dst, err := t.AppendText(dst)
	if err != nil {
		return nil, err
	}
	return append(dst, '"'), nil
}

const hex = "0123456789abcdef"

// htmlSafe reports whether encoding/json writes the ASCII byte b in a string as it is.
func htmlSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// String appends s quoted as encoding/json writes a string (HTML escaping on, as in
// json.Marshal): invalid UTF-8 becomes \ufffd, and U+2028 and U+2029 are escaped.
func String[S []byte | string](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if htmlSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscaped(dst, b)
			i++
			start = i
			continue
		}
		// A rune's few bytes as a string of the stack, for []byte and string alike.
		c, size := utf8.DecodeRuneInString(string(s[i:min(len(s), i+utf8.UTFMax)]))
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscaped appends the escape of an ASCII byte that is not htmlSafe.
func appendEscaped(dst []byte, b byte) []byte {
	switch b {
	case '\\', '"':
		return append(dst, '\\', b)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
}

// Array appends items as encoding/json writes a slice: null for a nil one, else each item by
// write between brackets, comma-separated.
func Array[T any](dst []byte, items []T, write func(T, []byte) []byte) []byte {
	if items == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = write(it, dst)
	}
	return append(dst, ']')
}
