package main

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// limitFlags bound what one request or one connection may take of the server, so that slow or
// stuck clients cannot hold its connections and goroutines.
type limitFlags struct {
	RequestTimeout    time.Duration `default:"30s" env:"API_REQUEST_TIMEOUT" help:"Deadline of a request's work (a command always runs to its end, within its own 30 s bound)."`
	ReadHeaderTimeout time.Duration `default:"10s" env:"API_READ_HEADER_TIMEOUT" help:"How long a client may take to send a request's headers; a slower connection is closed."`
	ReadTimeout       time.Duration `default:"30s" env:"API_READ_TIMEOUT" help:"How long a client may take to send a whole request, body included; a slower connection is closed."`
	IdleTimeout       time.Duration `default:"60s" env:"API_IDLE_TIMEOUT" help:"How long a keep-alive connection may wait for its next request before it is closed."`
	MaxConnections    int           `default:"0" env:"API_MAX_CONNECTIONS" help:"Most connections open at once, idle ones included; one more is answered 503 with Retry-After and closed. 0: the open-file limit (RLIMIT_NOFILE) less 256 for the store's files and twice --webhooks-attempts for the deliveries' connections, at most 4096."`
	BodyMemory        int64         `default:"16" env:"API_BODY_MEMORY" help:"MiB of command bodies read and checked at once, past the first 16 KiB of each; a body that finds no room within 1 s is answered 503 with Retry-After."`
}

// writeTimeout bounds the writing of an answer, a fixed limit of the HTTP server.
const writeTimeout = 60 * time.Second

// The default of --max-connections leaves connectionReserve file descriptors to the store (its
// database files, once per pooled SQLite connection), the logs and the refused connections
// being answered, and stays at most connectionCap: an idle connection holds about 20 KiB, so
// 4096 of them hold about 80 MB.
const (
	connectionReserve = 256
	connectionCap     = 4096
)

// maxConnections is --max-connections, or its default for the process's open-file limit, of
// which outgoing descriptors are the webhook deliveries' (webhooks.Config.OutgoingConnections).
func (f limitFlags) maxConnections(outgoing int) (int, error) {
	switch {
	case f.MaxConnections > 0:
		return f.MaxConnections, nil
	case f.MaxConnections < 0:
		return 0, errors.New("--max-connections must not be negative")
	}
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		return 0, fmt.Errorf("read the open-file limit for --max-connections: %w", err)
	}
	return connectionsFor(nofile.Cur, uint64(outgoing)), nil
}

// connectionsFor is the default of --max-connections under an open-file limit of nofile, with
// outgoing descriptors taken by the deliveries.
func connectionsFor(nofile, outgoing uint64) int {
	reserve := connectionReserve + outgoing
	n := nofile / 2 // a limit too small for the reserve: share it
	if nofile > 2*reserve {
		n = nofile - reserve
	}
	return int(max(1, min(n, connectionCap)))
}
