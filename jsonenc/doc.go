// Package jsonenc appends JSON byte for byte as encoding/json writes it (HTML-escaped strings,
// RFC 3339 times, sorted map keys), without reflection, for the stored formats and answers that
// every keyed command writes: their bytes are hashed, stored and replayed, so they must not
// depend on which encoder wrote them. Tests compare every encoder with encoding/json.
package jsonenc
