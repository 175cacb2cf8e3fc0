package main

import (
	"encoding/json"
	"io"
)

// formatFlag is the one output switch of every command that prints data: a table for people,
// or for programs the JSON the API answers for the same thing, so that one parser reads both.
type formatFlag struct {
	Format string `default:"table" enum:"table,json" help:"Output: 'table' for people, or 'json', the shape the API answers for the same thing."`
}

// writeJSON writes v as indented JSON: the output is read by people too.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
