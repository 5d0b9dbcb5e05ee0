// Package qdranttest runs an in-process Qdrant gRPC server for tests.
//
// The server is built on the go-client's generated service interfaces and
// implements the parts of Qdrant's Qdrant, Collections and Points services
// that cache/qdrant uses: collection create/get/exists/list/update(metadata)/
// delete, payload index creation, upsert, get, delete (by ids or filter),
// count, and nearest-neighbour query/search with filters, score_threshold,
// limit/offset and payload/vector selectors. Stored vectors of a cosine
// collection are normalised on write, as Qdrant does, so scores are cosine
// similarities.
//
// It is faithful where a mistake would hide a bug: a request shape it does not
// implement (an unknown filter condition, min_should, prefetch, named vectors,
// shard keys, …) fails with codes.Unimplemented instead of being ignored,
// because an ignored filter could leak entries across tenants.
//
// It does not model Qdrant's HNSW approximation, write-ahead log, optimiser,
// clustering, consistency levels or latency; searches are exact.
package qdranttest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Version is what the fake reports from HealthCheck.
const Version = "1.17.1"

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the server reject calls whose "api-key" metadata is not key,
// like a Qdrant started with QDRANT__SERVICE__API_KEY.
func WithAPIKey(key string) Option {
	return func(s *Server) { s.apiKey = key }
}

// WithMaxPoints bounds the points the server holds over all collections
// (the fake keeps them in memory): an upsert that would add points beyond n
// fails with codes.ResourceExhausted, as a Qdrant out of disk fails its
// writes. Zero or negative means no bound (tests that start a fake for
// themselves); cmd/testqdrant always sets one.
func WithMaxPoints(n int) Option {
	return func(s *Server) { s.maxPoints = n }
}

// Server is a running fake. Its data survives Stop and Restart, like a
// Qdrant with a persistent volume.
type Server struct {
	apiKey    string
	maxPoints int

	mu          sync.Mutex
	addr        string
	grpc        *grpc.Server
	delay       time.Duration
	collections map[string]*collection
	opID        uint64
	calls       map[string]int
}

// Start listens on a loopback TCP port and serves until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Serve("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatalf("start fake qdrant: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Serve listens on addr ("host:port"; port 0 picks one) and serves until
// Stop. It is what cmd/testqdrant runs: a stand-in for Qdrant in tests that
// start several processes, never a store (everything is in memory and lost
// on exit).
func Serve(addr string, opts ...Option) (*Server, error) {
	s := &Server{collections: map[string]*collection{}, calls: map[string]int{}}
	for _, o := range opts {
		o(s)
	}
	if err := s.listen(addr); err != nil {
		return nil, err
	}
	return s, nil
}

// Points is how many points the server holds over all collections.
func (s *Server) Points() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pointsLocked()
}

func (s *Server) pointsLocked() int {
	n := 0
	for _, c := range s.collections {
		n += len(c.points)
	}
	return n
}

// Addr is the "host:port" the server listens on; it stays the same across
// Restart.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop closes the listener and every open connection at once, as a crashed
// or killed Qdrant would. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	g := s.grpc
	s.grpc = nil
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// Restart starts serving again on the same address with the same data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	var err error
	// The port was just released; retry briefly in case the kernel is slow
	// to let it go.
	for range 50 {
		if err = s.listen(s.Addr()); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("restart fake qdrant on %s: %v", s.Addr(), err)
}

// SetDelay makes every call wait d before it is handled (a slow Qdrant).
// The wait ends early when the caller's context does.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Calls returns how many times the named method (e.g. "Upsert", "Query") was
// called.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Collections returns the names of the existing collections, sorted.
func (s *Server) Collections() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n := range s.collections {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// FieldIndexes returns the payload indexes created on a collection, by field.
func (s *Server) FieldIndexes(name string) map[string]qdrant.FieldType {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.collections[name]
	if !ok {
		return nil
	}
	out := make(map[string]qdrant.FieldType, len(c.indexes))
	for k, v := range c.indexes {
		out[k] = v
	}
	return out
}

func (s *Server) listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g := grpc.NewServer(
		grpc.ChainUnaryInterceptor(s.intercept),
		// The go-client pings every 10s even when idle; grpc-go's default
		// policy would answer that with GOAWAY "too_many_pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	qdrant.RegisterQdrantServer(g, healthService{})
	qdrant.RegisterCollectionsServer(g, &collectionsService{s: s})
	qdrant.RegisterPointsServer(g, &pointsService{s: s})
	s.mu.Lock()
	s.addr = lis.Addr().String()
	s.grpc = g
	s.mu.Unlock()
	go func() { _ = g.Serve(lis) }()
	return nil
}

func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s.mu.Lock()
	delay := s.delay
	s.calls[methodName(info.FullMethod)]++
	s.mu.Unlock()
	if s.apiKey != "" {
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("api-key"); len(got) != 1 || got[0] != s.apiKey {
			return nil, status.Error(codes.Unauthenticated, "Must provide an API key or an Authorization bearer token")
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return handler(ctx, req)
}

func methodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}

type healthService struct {
	qdrant.UnimplementedQdrantServer
}

func (healthService) HealthCheck(context.Context, *qdrant.HealthCheckRequest) (*qdrant.HealthCheckReply, error) {
	return &qdrant.HealthCheckReply{Title: "qdrant - vector search engine (qdranttest fake)", Version: Version}, nil
}
