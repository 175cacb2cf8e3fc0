package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the HTTP API (openapi.yaml): the contract the
// handlers implement, served at /openapi.yaml and checked by the tests.
//
//go:embed openapi.yaml
var OpenAPI []byte
