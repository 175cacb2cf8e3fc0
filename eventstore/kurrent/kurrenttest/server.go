package kurrenttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/acme/orders/eventstore/sqlite"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Version is the KurrentDB version the server reports through the server features service.
const Version = "24.10.0"

// Config tunes a Server. The zero Config is ready to use.
type Config struct {
	// IdempotencyWindow is how many recent event ids are remembered for recognising repeated
	// appends with Any or StreamExists; 0 means 100,000.
	IdempotencyWindow int
	// MaxAppendSize is KurrentDB's --max-append-size: an append whose events' data, metadata
	// and types add up to more bytes is refused with InvalidArgument; 0 means 1 MiB, KurrentDB's
	// default.
	MaxAppendSize int
}

// Server is a running test server. Start it with Start; Close stops it.
type Server struct {
	store *sqlite.Store
	grpc  *grpc.Server
	ln    net.Listener
	done  chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	streams map[string]*entry // streams touched since the start, by name
	ids     idCache
	maxSize int

	closeOnce sync.Once
	closeErr  error
}

// Start opens (or creates) the data in directory dir and serves on addr ("127.0.0.1:0" picks a
// free port).
func Start(addr, dir string, cfg Config) (*Server, error) {
	store, err := sqlite.Open(dir, sqlite.Config{})
	if err != nil {
		return nil, fmt.Errorf("test server: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("test server: %w", err)
	}
	window := cfg.IdempotencyWindow
	if window <= 0 {
		window = 100_000
	}
	s := &Server{
		store:   store,
		ln:      ln,
		done:    make(chan struct{}),
		streams: map[string]*entry{},
		ids:     idCache{max: window, byID: map[[16]byte]eventRef{}},
		maxSize: cmp.Or(cfg.MaxAppendSize, 1<<20),
		// Stop waits for the handlers, so that the store closes after the last of them.
		grpc: grpc.NewServer(grpc.WaitForHandlers(true), grpc.MaxRecvMsgSize(17<<20),
			grpc.KeepaliveEnforcementPolicy(clientPings), grpc.KeepaliveParams(serverPings)),
	}
	streams.RegisterStreamsServer(s.grpc, &streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(s.grpc, featuresService{})
	go func() {
		defer close(s.done)
		s.grpc.Serve(ln)
	}()
	return s, nil
}

// The client pings every 10 s (KeepAliveInterval), idle or not, and KurrentDB accepts that;
// gRPC's default policy (5 min, not without a call) would answer the third ping with GOAWAY
// "too_many_pings" and drop idle subscriptions. Half the interval leaves room for jitter.
var clientPings = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// KurrentDB's own --keep-alive-interval and --keep-alive-timeout, 10 s each: the server pings
// an idle client too, and ends a connection whose client went away without closing it.
var serverPings = keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 10 * time.Second}

// Addr is the address the server listens on, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the connection string for the server: esdb://host:port?tls=false.
func (s *Server) URL() string { return "esdb://" + s.Addr() + "?tls=false" }

// Close stops the server at once, as a crash would for its clients: open calls and
// subscriptions fail with a connection error. It then closes the data.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.grpc.Stop()
		<-s.done
		s.closeErr = s.store.Close()
	})
	return s.closeErr
}

// featuresService answers the client's question, on connecting, about what the server supports.
type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
}

func (featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	const svc = "event_store.client.streams.streams"
	return &serverfeatures.SupportedMethods{
		EventStoreServerVersion: Version,
		Methods: []*serverfeatures.SupportedMethod{
			{ServiceName: svc, MethodName: "read"},
			{ServiceName: svc, MethodName: "append"},
			{ServiceName: svc, MethodName: "delete"},
		},
	}, nil
}

// streamsService is KurrentDB's Streams service.
type streamsService struct {
	streams.UnimplementedStreamsServer
	s *Server
}

// idCache is KurrentDB's committed-events cache: the stream and revision of recent event ids,
// forgetting the oldest past max.
type idCache struct {
	max   int
	byID  map[[16]byte]eventRef
	order [][16]byte // insertion order, oldest first
}

type eventRef struct {
	stream   string
	revision int64
}

func (c *idCache) put(id [16]byte, ref eventRef) {
	if _, ok := c.byID[id]; !ok {
		c.order = append(c.order, id)
	}
	c.byID[id] = ref
	for len(c.order) > c.max {
		delete(c.byID, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *idCache) get(id [16]byte) (eventRef, bool) {
	ref, ok := c.byID[id]
	return ref, ok
}

var errStopped = errors.New("test server stopped")
