package kurrent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/acme/orders/eventstore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config says where KurrentDB is.
type Config struct {
	// URL is the connection string, for example "esdb://localhost:2113?tls=false" for one
	// insecure node, "esdb://admin:changeit@node1:2113,node2:2113,node3:2113?tlsCAFile=ca.crt"
	// for a secure cluster, or "esdb+discover://cluster.example.com:2113" for DNS discovery.
	// TLS, credentials, node preference, keepalive and deadlines are its parameters.
	URL string
	// Log receives the client's warnings and errors; nil discards them.
	Log *slog.Logger
}

// Store is the KurrentDB backend. It is safe for concurrent use.
type Store struct {
	conf *esdb.Configuration

	// ctx ends when the store closes: it ends the calls and subscriptions under way.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	client   *esdb.Client
	closed   bool
	inflight sync.WaitGroup // calls holding the client; Close waits for them
}

var (
	_ eventstore.Store        = (*Store)(nil)
	_ eventstore.Feed         = (*Store)(nil)
	_ eventstore.MaxAgeSetter = (*Store)(nil)
)

// Open parses the connection string and makes a client. It does not connect: the client
// connects on the first call, and again after the connection drops.
func Open(cfg Config) (*Store, error) {
	conf, err := esdb.ParseConnectionString(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb connection string: %w", err)
	}
	conf.Logger = logTo(cfg.Log)
	client, err := esdb.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Store{conf: conf, ctx: ctx, cancel: cancel, client: client}, nil
}

// Close ends the subscriptions and calls under way, waits for them, and closes the client.
// Later calls fail with eventstore.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	// The client's Close closes a channel that its calls send on while they connect: close it
	// once none is left. A caller still inside the body of a loop over a read or subscription
	// holds its call open without using the client (its gRPC stream is already cancelled), so
	// the wait is bounded.
	waited := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(waited)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-waited:
	case <-t.C:
	}
	return s.client.Close()
}

// closeWait bounds how long Close waits for the calls under way.
const closeWait = 5 * time.Second

// acquire hands out the client for one call, or says why the call cannot start. The caller
// calls release when it no longer uses the client, and uses the returned context, which also
// ends when the store closes.
func (s *Store) acquire(ctx context.Context) (c *esdb.Client, callCtx context.Context, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, nil, eventstore.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	s.inflight.Add(1)
	callCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return s.client, callCtx, func() {
		stop()
		cancel()
		s.inflight.Done()
	}, nil
}

// renew replaces a client that closed itself. EventStore-Client-Go closes a client for good
// when it cannot rediscover the node after a dropped connection (MaxDiscoverAttempts); a new
// client starts discovery afresh. The old one is left to the garbage collector rather than
// closed: calls still inside it may send on the channel that its Close would close.
func (s *Store) renew(old *esdb.Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.client != old {
		return
	}
	if c, err := esdb.NewClient(s.conf); err == nil {
		s.client = c
	}
}

// errWrongVersion marks a KurrentDB wrong expected version before it is given its details.
var errWrongVersion = errors.New("wrong expected version")

// translate is the one place where the client's errors become the contract's: a closed store
// or an ended context first, then the client's error codes (checked with errors.As: the
// client's FromError reports ok for a nil error and does not unwrap), then, for errors the
// client leaves unclassified, the gRPC status. Wrong expected versions come back as
// errWrongVersion, for the caller to complete (see wrongRevision).
func (s *Store) translate(ctx context.Context, c *esdb.Client, err error) error {
	if err == nil {
		return nil
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return eventstore.ErrClosed
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var esErr *esdb.Error
	if errors.As(err, &esErr) {
		switch esErr.Code() {
		case esdb.ErrorCodeWrongExpectedVersion, esdb.ErrorCodeStreamDeleted:
			// StreamDeleted answers StreamExists on a soft-deleted stream: for the contract a
			// deleted stream does not exist, so that expectation is simply wrong.
			return errWrongVersion
		case esdb.ErrorCodeResourceNotFound:
			return eventstore.ErrStreamNotFound
		case esdb.ErrorCodeConnectionClosed:
			s.renew(c)
			return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
		case esdb.ErrorUnavailable, esdb.ErrorCodeDeadlineExceeded, esdb.ErrorAborted, esdb.ErrorCodeNotLeader:
			return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err)
		case esdb.ErrorCodeUnauthenticated, esdb.ErrorCodeAccessDenied, esdb.ErrorCodeUnsupportedFeature, esdb.ErrorCodeParsing:
			return fmt.Errorf("kurrentdb: %w", err)
		}
	}
	// Unclassified by the client: a delete's wrong expected version is a FailedPrecondition
	// status (with the details in trailers the client does not expose); a dropped subscription
	// hands over the gRPC error as it is.
	switch status.Code(err) {
	case codes.FailedPrecondition:
		return errWrongVersion
	case codes.InvalidArgument, codes.OutOfRange:
		return fmt.Errorf("%w: %v", eventstore.ErrInvalidArgument, err)
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		return fmt.Errorf("kurrentdb: %w", err)
	}
	if _, ok := status.FromError(err); ok {
		return fmt.Errorf("%w: %v", eventstore.ErrUnavailable, err) // connection or server trouble
	}
	return fmt.Errorf("kurrentdb: %w", err)
}

// logTo adapts the client's printf-style logging to slog, keeping warnings and errors.
func logTo(log *slog.Logger) esdb.LoggingFunc {
	if log == nil {
		return esdb.NoopLogging()
	}
	return func(level esdb.LogLevel, format string, args ...any) {
		switch level {
		case esdb.LogWarn:
			log.Warn(fmt.Sprintf(format, args...), "component", "kurrentdb-client")
		case esdb.LogError:
			log.Error(fmt.Sprintf(format, args...), "component", "kurrentdb-client")
		}
	}
}
