package console

import (
	"html/template"
	"strings"
	"time"

	"github.com/acme/orders/domain/order"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"when":      when,
	"money":     func(m order.Money) string { return m.String() },
	"eventName": eventName,
	"short":     func(s string) string { return s[:min(len(s), 12)] },
	"percent": func(part, whole uint64) uint64 {
		if whole == 0 {
			return 100
		}
		return min(part*100/whole, 100)
	},
}

// when is t as a <time> element: in UTC in the page, which the console's script shows in the
// browser's zone, keeping UTC in the element's title (shown on hover).
func when(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	text := u.Format("2006-01-02 15:04:05 UTC")
	// Both strings are digits, letters and punctuation of the layouts only: nothing to escape.
	return template.HTML(`<time datetime="` + u.Format(time.RFC3339Nano) + `" title="` + text + `">` + text + `</time>`)
}

// eventName is an event type as a reader says it: "order.payment-confirmed.v1" is
// "payment confirmed".
func eventName(typ string) string {
	name := strings.TrimPrefix(typ, "order.")
	if i := strings.LastIndex(name, ".v"); i > 0 {
		name = name[:i]
	}
	return strings.ReplaceAll(name, "-", " ")
}
