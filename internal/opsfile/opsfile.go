// Package opsfile reads the operator's JSON files that the service reads at start and again on
// SIGHUP (the payment providers, the NATS intake): bounded in bytes, one JSON object, no
// unknown field.
package opsfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Read reads the file at path, refusing one of more than limit bytes.
func Read(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}

// Decode decodes data into v: one JSON value and nothing after it, no field v does not name.
// Its errors are encoding/json's, which the caller may describe otherwise (a file with secrets
// must not quote them).
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more after the JSON object")
	}
	return nil
}
