package main

import "time"

// limitFlags bound what one request or one connection may take of the server, so that slow or
// stuck clients cannot hold its connections and goroutines.
type limitFlags struct {
	RequestTimeout    time.Duration `default:"30s" env:"API_REQUEST_TIMEOUT" help:"Deadline of a request's work (a command always runs to its end, within its own 30 s bound)."`
	ReadHeaderTimeout time.Duration `default:"10s" env:"API_READ_HEADER_TIMEOUT" help:"How long a client may take to send a request's headers; a slower connection is closed."`
	ReadTimeout       time.Duration `default:"30s" env:"API_READ_TIMEOUT" help:"How long a client may take to send a whole request, body included; a slower connection is closed."`
	BodyMemory        int64         `default:"16777216" env:"API_BODY_MEMORY" help:"Bytes of command bodies read and checked at once, past the first 16 KiB of each (16 MiB); a body that finds no room within 1 s is answered 503 with Retry-After."`
}

// Fixed limits of the HTTP server.
const (
	writeTimeout   = 60 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
)
