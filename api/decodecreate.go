package api

import (
	"strconv"
	"unicode/utf8"
)

// decodeCreate reads a create's body into b as decode does, without reflection, for the bodies
// clients send: every name known and given once, strings without escapes in valid UTF-8,
// integers without fraction or exponent, no null. For any other body it returns false, with b
// in any state: decode then reads it, and words its refusal if it is one. Whatever it takes,
// decode takes too, into the same value (TestDecodeCreateIsDecodes).
func decodeCreate(body []byte, b *createBody) bool {
	r := bodyReader{b: body}
	var seen [5]bool
	ok := r.object(func(name []byte) bool {
		i := -1
		switch string(name) {
		case "customerId":
			i, b.CustomerID = 0, new(string)
			*b.CustomerID, r.ok = r.str()
		case "currency":
			i, b.Currency = 1, new(string)
			*b.Currency, r.ok = r.str()
		case "clientReference":
			i = 2
			b.ClientReference, r.ok = r.str()
		case "channel":
			i = 3
			b.Channel, r.ok = r.str()
		case "lines":
			i = 4
			b.Lines = []lineBody{}
			r.ok = r.array(func() bool {
				var l lineBody
				ok := r.object(func(name []byte) bool { return l.member(&r, string(name)) })
				b.Lines = append(b.Lines, l)
				return ok
			})
		}
		if i < 0 || seen[i] {
			return false
		}
		seen[i] = true
		return r.ok
	})
	r.space()
	return ok && r.i == len(body)
}

// member reads the value of l's member name; false if it declines it (see decodeCreate).
func (l *lineBody) member(r *bodyReader, name string) bool {
	var ok bool
	switch {
	case name == "sku" && l.SKU == nil:
		l.SKU = new(string)
		*l.SKU, ok = r.str()
	case name == "name" && !r.named:
		r.named = true // an empty name is as good as none: this tells a repeat
		l.Name, ok = r.str()
	case name == "quantity" && l.Quantity == nil:
		l.Quantity = new(int64)
		*l.Quantity, ok = r.integer()
	case name == "unitPrice" && l.UnitPrice == nil:
		l.UnitPrice = new(int64)
		*l.UnitPrice, ok = r.integer()
	}
	return ok
}

// bodyReader reads JSON from b[i:] for decodeCreate.
type bodyReader struct {
	b     []byte
	i     int
	ok    bool
	named bool // the line being read has a name member
}

func (r *bodyReader) space() {
	for r.i < len(r.b) && (r.b[r.i] == ' ' || r.b[r.i] == '\t' || r.b[r.i] == '\n' || r.b[r.i] == '\r') {
		r.i++
	}
}

// is skips whitespace and then c, if it is there.
func (r *bodyReader) is(c byte) bool {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// object reads an object, each member's value by member, which is given the member's name.
func (r *bodyReader) object(member func(name []byte) bool) bool {
	r.named = false
	if !r.is('{') {
		return false
	}
	if r.is('}') {
		return true
	}
	for {
		r.space()
		name, ok := r.raw()
		if !ok || !r.is(':') {
			return false
		}
		r.space()
		if !member(name) {
			return false
		}
		if r.is('}') {
			return true
		}
		if !r.is(',') {
			return false
		}
	}
}

// array reads an array, each element by elem.
func (r *bodyReader) array(elem func() bool) bool {
	if !r.is('[') {
		return false
	}
	if r.is(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if r.is(']') {
			return true
		}
		if !r.is(',') {
			return false
		}
	}
}

// str reads a string without escapes or control characters, in valid UTF-8.
func (r *bodyReader) str() (string, bool) {
	s, ok := r.raw()
	return string(s), ok
}

// raw reads a string as str does, and returns its bytes in the body.
func (r *bodyReader) raw() ([]byte, bool) {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return nil, false
	}
	start := r.i + 1
	for r.i = start; r.i < len(r.b) && r.b[r.i] != '"'; r.i++ {
		if r.b[r.i] < 0x20 || r.b[r.i] == '\\' {
			return nil, false
		}
	}
	if r.i >= len(r.b) || !utf8.Valid(r.b[start:r.i]) {
		return nil, false
	}
	r.i++
	return r.b[start : r.i-1], true
}

// integer reads an integer of JSON's grammar without fraction or exponent, in int64's range.
func (r *bodyReader) integer() (int64, bool) {
	start := r.i
	if r.i < len(r.b) && r.b[r.i] == '-' {
		r.i++
	}
	digits := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	if r.i == digits || (r.b[digits] == '0' && r.i > digits+1) {
		return 0, false // no digits, or a leading zero
	}
	if r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(r.b[start:r.i]), 10, 64)
	return n, err == nil
}
