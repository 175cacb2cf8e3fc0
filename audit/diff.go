package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// fieldDiff names the fields in which want and got, two values of one struct type, differ,
// with both values: "Status: paid, found shipped; Total: ...", or "" when none does.
func fieldDiff(want, got any) string {
	var diffs []string
	for _, c := range Changes(want, got) {
		diffs = append(diffs, fmt.Sprintf("%s: %s, found %s", c.Field, c.Before, c.After))
	}
	return strings.Join(diffs, "; ")
}

// Change is a field that differs between two values of a struct, each shown as a reader of a
// finding wants it.
type Change struct {
	Field, Before, After string
}

// Changes lists the exported fields in which before and after, two values of one struct type,
// differ, in the order of the type's fields. A field whose type has an Equal method
// (time.Time, order.Charges) is compared by it, any other with reflect.DeepEqual, so a nil
// slice differs from an empty one.
func Changes(before, after any) []Change {
	w, g := reflect.ValueOf(before), reflect.ValueOf(after)
	if w.Type() != g.Type() || w.Kind() != reflect.Struct {
		panic(fmt.Sprintf("Changes of %T and %T", before, after))
	}
	var out []Change
	for i := range w.NumField() {
		f := w.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		a, b := w.Field(i).Interface(), g.Field(i).Interface()
		if !equal(a, b) {
			out = append(out, Change{Field: f.Name, Before: show(a), After: show(b)})
		}
	}
	return out
}

func equal(a, b any) bool {
	if m := reflect.ValueOf(a).MethodByName("Equal"); m.IsValid() &&
		m.Type().NumIn() == 1 && m.Type().In(0) == reflect.TypeOf(b) && m.Type().NumOut() == 1 && m.Type().Out(0).Kind() == reflect.Bool {
		return m.Call([]reflect.Value{reflect.ValueOf(b)})[0].Bool()
	}
	return reflect.DeepEqual(a, b)
}

// show is v as a reader of a finding wants it: by its String method, else as JSON if it has
// its own encoding (order.Charges), else quoted if it is a string (so that "" shows), nil if it
// is a nil slice (not [], like an empty one), else as Go prints it.
func show(v any) string {
	switch v := v.(type) {
	case fmt.Stringer:
		return v.String()
	case json.Marshaler:
		if b, err := v.MarshalJSON(); err == nil {
			return string(b)
		}
	}
	switch rv := reflect.ValueOf(v); {
	case rv.Kind() == reflect.String:
		return fmt.Sprintf("%q", v)
	case rv.Kind() == reflect.Slice && rv.IsNil():
		return "nil"
	}
	return fmt.Sprintf("%+v", v)
}

// JSONChanges lists the members in which before and after, two JSON objects, differ: in the
// order of after's members, then those only before has, each value as its JSON text (absent:
// empty). A document's own names and forms (RFC 3339 times, amounts in minor units) are what
// its reader knows.
func JSONChanges(before, after []byte) ([]Change, error) {
	b, bNames, err := members(before)
	if err != nil {
		return nil, err
	}
	a, aNames, err := members(after)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, name := range append(aNames, slices.DeleteFunc(bNames, func(n string) bool { return a[n] != nil })...) {
		if !bytes.Equal(b[name], a[name]) {
			out = append(out, Change{Field: name, Before: string(b[name]), After: string(a[name])})
		}
	}
	return out, nil
}

// members reads a JSON object's members, compacted, and their names in order.
func members(doc []byte) (map[string][]byte, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("not a JSON object: %.40q", doc)
	}
	out := map[string][]byte{}
	var names []string
	for dec.More() {
		name, err := dec.Token()
		var v json.RawMessage
		if err == nil {
			err = dec.Decode(&v)
		}
		if err != nil {
			return nil, nil, err
		}
		var c bytes.Buffer
		json.Compact(&c, v) // valid: Decode checked it
		out[name.(string)], names = c.Bytes(), append(names, name.(string))
	}
	return out, names, nil
}
