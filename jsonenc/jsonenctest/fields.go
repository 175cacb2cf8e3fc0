package jsonenctest

import (
	"reflect"
	"testing"
)

// Fields tells whether the values a test generates set every field of their type at least
// once. An encoder built on jsonenc lists its type's fields by hand: a field added to the type
// and not to its encoder would go unseen by a comparison with encoding/json whose values never
// set it. Note every generated value, then Check.
type Fields struct {
	typ reflect.Type
	set map[string]bool
}

// Note records which fields of v (a struct, its embedded structs' fields included) are not zero.
func (f *Fields) Note(v any) {
	rv := reflect.ValueOf(v)
	if f.typ == nil {
		f.typ, f.set = rv.Type(), map[string]bool{}
	}
	for _, sf := range reflect.VisibleFields(f.typ) {
		if sf.IsExported() && !sf.Anonymous && !rv.FieldByIndex(sf.Index).IsZero() {
			f.set[sf.Name] = true
		}
	}
}

// Check fails t for every exported field that no noted value set.
func (f *Fields) Check(t testing.TB) {
	t.Helper()
	if f.typ == nil {
		t.Fatal("no value noted")
	}
	for _, sf := range reflect.VisibleFields(f.typ) {
		if sf.IsExported() && !sf.Anonymous && !f.set[sf.Name] {
			t.Errorf("%s.%s is never set by the generated values: generate it, and encode it", f.typ.Name(), sf.Name)
		}
	}
}
