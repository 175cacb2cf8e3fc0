// Package tests holds black-box end-to-end, crash and load tests against the built binary.
package tests
