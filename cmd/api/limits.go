package main

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"syscall"
	"time"
)

// limitFlags bound what one request or one connection may take of the server, so that slow or
// stuck clients cannot hold its connections and goroutines.
type limitFlags struct {
	RequestTimeout     time.Duration `default:"30s" env:"API_REQUEST_TIMEOUT" help:"Deadline of a request's work (a command always runs to its end, within its own 30 s bound)."`
	ReadHeaderTimeout  time.Duration `default:"10s" env:"API_READ_HEADER_TIMEOUT" help:"How long a client may take to send a request's headers; a slower connection is closed."`
	ReadTimeout        time.Duration `default:"30s" env:"API_READ_TIMEOUT" help:"How long a client may take to send a whole request, body included; a slower connection is closed."`
	IdleTimeout        time.Duration `default:"60s" env:"API_IDLE_TIMEOUT" help:"How long a keep-alive connection may wait for its next request before it is closed."`
	MaxConnections     int           `default:"0" env:"API_MAX_CONNECTIONS" help:"Most connections open at once, idle ones included; one more is answered 503 with Retry-After and closed. 0: the open-file limit (RLIMIT_NOFILE) less 256 for the store's files and twice --webhooks-attempts for the deliveries' connections, at most 4096."`
	BodyMemory         int64         `default:"16" env:"API_BODY_MEMORY" help:"MiB of command bodies read and checked at once, past the first 16 KiB of each; a body that finds no room within 1 s is answered 503 with Retry-After."`
	ProviderBodyMemory int64         `default:"4" env:"API_PROVIDER_BODY_MEMORY" help:"MiB of payment providers' deliveries read and verified at once, past the first 16 KiB of each, apart from --body-memory; a delivery that finds no room within 1 s is answered 503 with Retry-After."`
	MemoryLimit        int64         `default:"256" env:"API_MEMORY_LIMIT" help:"MiB of memory the Go runtime keeps the process under by collecting garbage sooner as it nears them (its soft limit; GOMEMLIMIT wins if set); 0: none. --key-memory, --order-memory, --body-memory and --provider-body-memory together must fit in half of it: the rest is the work of the requests in flight."`
}

// setMemoryLimit sets the runtime's soft memory limit from --memory-limit, unless GOMEMLIMIT
// set it, once the bounded memories (MiB) are known to fit in half of it. Without a limit the
// heap grows to twice what is live before a collection, and the pages it frees meanwhile stay
// in the process's resident memory. It returns the limit in force, in bytes (math.MaxInt64:
// none).
func (f limitFlags) setMemoryLimit(bounded int64, getenv func(string) string) (int64, error) {
	switch {
	case getenv("GOMEMLIMIT") != "":
		return debug.SetMemoryLimit(-1), nil
	case f.MemoryLimit < 0:
		return 0, errors.New("--memory-limit must not be negative")
	case f.MemoryLimit == 0:
		return debug.SetMemoryLimit(math.MaxInt64), nil
	case 2*bounded > f.MemoryLimit:
		return 0, fmt.Errorf("--key-memory, --order-memory, --body-memory and --provider-body-memory take %d MiB, more than half of --memory-limit (%d MiB)", bounded, f.MemoryLimit)
	}
	debug.SetMemoryLimit(f.MemoryLimit << 20)
	return f.MemoryLimit << 20, nil
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
// which outgoing descriptors are the webhook deliveries' (twice --webhooks-attempts: see
// webhooks.Config.MaxAttempts).
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
