package main

import "time"

// limitFlags bound what one request or one connection may take of the server, so that slow or
// stuck clients cannot hold its connections and goroutines.
type limitFlags struct {
	RequestTimeout    time.Duration `default:"30s" env:"API_REQUEST_TIMEOUT" help:"Deadline of a request's work (a command always runs to its end, within its own 30 s bound)."`
	ReadHeaderTimeout time.Duration `default:"10s" env:"API_READ_HEADER_TIMEOUT" help:"How long a client may take to send a request's headers; a slower connection is closed."`
	ReadTimeout       time.Duration `default:"30s" env:"API_READ_TIMEOUT" help:"How long a client may take to send a whole request, body included; a slower connection is closed."`
}

// Fixed limits of the HTTP server.
const (
	writeTimeout   = 60 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
)
