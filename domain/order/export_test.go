package order

import "slices"

// Events returns the codec for every event type of this package.
func Events() Codec { return events }

// Types returns the current type names the codec knows, sorted: those it writes.
func (c Codec) Types() []string {
	return c.names(func(t eventType) bool { return t.owns != nil })
}

// EarlierTypes returns the earlier versions it reads by upcasting, sorted.
func (c Codec) EarlierTypes() []string {
	return c.names(func(t eventType) bool { return t.owns == nil })
}

func (c Codec) names(keep func(eventType) bool) []string {
	var names []string
	for name, t := range c.types {
		if keep(t) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
