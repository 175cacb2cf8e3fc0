package apiclient

// The client is generated from the API's OpenAPI document; TestGeneratedClientIsCurrent fails
// when the document has changed and the client was not generated again.
//go:generate go tool oapi-codegen -config oapi-codegen.yaml -o client.gen.go ../../api/openapi.yaml
