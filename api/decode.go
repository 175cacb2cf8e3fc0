package api

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json"
)

// decode reads a JSON body strictly into v, a pointer to a request body struct: one value of
// v's type, known members only, each named exactly as its tag and at most once, valid UTF-8
// without lone surrogates. These are the rules of go-json-experiment/json, with unknown
// members refused. The key's fingerprint is taken from the body as written
// (idempotency.Fingerprint), whose reading matches names regardless of case and keeps the last
// of two: {"amount":1,"AMOUNT":2} and {"AMOUNT":2,"amount":1} have one fingerprint, so a body
// it would read otherwise than decode is refused here.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: a JSON body is required", errMalformed)
	}
	if err := json.Unmarshal(body, v, json.RejectUnknownMembers(true)); err != nil {
		return fmt.Errorf("%w: %v", errMalformed, err)
	}
	return nil
}
