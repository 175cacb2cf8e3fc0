package idempotency

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/acme/orders/jsonenc"
)

// The canonical form of a body is what encoding/json writes for the value it decodes, with
// numbers kept as written (see canonicalJSON): fingerprints are stored, so its bytes are fixed
// for good. canonical writes the same bytes straight from the body, without the decoded value,
// for the bodies that requests send: strings without escapes, in valid UTF-8, and nesting
// below maxCanonicalDepth. For any other body it declines (ok false), and the body goes the
// way of encoding/json, which also words the errors of malformed ones
// (FuzzCanonicalIsEncodingJSONs compares the two).

// maxCanonicalDepth is the deepest nesting canonical writes.
const maxCanonicalDepth = 500

// canonical appends the canonical form of body to dst, or returns ok false if it declines it.
func canonical(dst, body []byte) (out []byte, ok bool) {
	p := canonicalizer{b: body, scratch: make([]byte, 0, len(body))}
	p.space()
	out, ok = p.value(dst, 0)
	if !ok || len(bytes.TrimSpace(body[p.i:])) > 0 {
		return nil, false
	}
	return out, true
}

// canonicalizer reads a body from b[i:].
type canonicalizer struct {
	b       []byte
	i       int
	scratch []byte // where an object is put in order, one object at a time
}

func (p *canonicalizer) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// value appends the canonical form of the value at p.i to dst.
func (p *canonicalizer) value(dst []byte, depth int) ([]byte, bool) {
	if p.i >= len(p.b) || depth >= maxCanonicalDepth {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(dst, depth+1)
	case c == '[':
		return p.array(dst, depth+1)
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return jsonenc.String(dst, s), true
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		if !p.number() {
			return nil, false
		}
		return append(dst, p.b[start:p.i]...), true
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
			p.i += len(lit)
			return append(dst, lit...), true
		}
	}
	return nil, false
}

// str reads a string without escapes in valid UTF-8 and returns its contents.
func (p *canonicalizer) str() ([]byte, bool) {
	start := p.i + 1
	end := bytes.IndexByte(p.b[start:], '"')
	if end < 0 {
		return nil, false
	}
	s := p.b[start : start+end]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return nil, false
		}
	}
	p.i = start + end + 1
	return s, utf8.Valid(s)
}

// number reads a number as JSON's grammar writes it.
func (p *canonicalizer) number() bool {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

func (p *canonicalizer) array(dst []byte, depth int) ([]byte, bool) {
	p.i++ // [
	dst = append(dst, '[')
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return append(dst, ']'), true
	}
	for n := 0; ; n++ {
		if n > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		p.space()
		if dst, ok = p.value(dst, depth); !ok {
			return nil, false
		}
		p.space()
		switch {
		case p.i >= len(p.b):
			return nil, false
		case p.b[p.i] == ']':
			p.i++
			return append(dst, ']'), true
		case p.b[p.i] != ',':
			return nil, false
		}
		p.i++
	}
}

// member is an object's member read: its name, and where its canonical value is.
type member struct {
	name     []byte
	from, to int
}

// object writes the members sorted by name, the last of several of one name, as
// encoding/json decodes an object into a map and writes the map.
func (p *canonicalizer) object(dst []byte, depth int) ([]byte, bool) {
	p.i++ // {
	start := len(dst)
	var small [16]member
	members := small[:0]
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return append(dst, '{', '}'), true
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		name, ok := p.str()
		if p.space(); !ok || p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		from := len(dst)
		if dst, ok = p.value(dst, depth); !ok {
			return nil, false
		}
		members = append(members, member{name: name, from: from, to: len(dst)})
		p.space()
		switch {
		case p.i >= len(p.b):
			return nil, false
		case p.b[p.i] == '}':
			p.i++
			return p.sorted(dst, start, members), true
		case p.b[p.i] != ',':
			return nil, false
		}
		p.i++
		p.space()
	}
}

// sorted replaces the values written from start with the object of members.
func (p *canonicalizer) sorted(dst []byte, start int, members []member) []byte {
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	values := dst[start:]
	out := append(p.scratch[:0], '{')
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(m.name, members[i+1].name) {
			continue // a later member of the same name replaces it
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = jsonenc.String(out, m.name)
		out = append(out, ':')
		out = append(out, values[m.from-start:m.to-start]...)
	}
	p.scratch = out
	return append(append(dst[:start], out...), '}')
}
