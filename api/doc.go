// Package api is the HTTP interface of the order service: the echo handlers, the one mapping
// of errors to RFC 9457 problems, and the OpenAPI document that describes them.
package api
