// Package flow answers one client request of a cached route: key → lookup
// → coalesce → call → write back → relay or replay, with resume. It is the
// request path of Breakwater, under the HTTP adapter (package proxy), which
// reads the body, applies the server's limits, mounts the APIs and turns
// each finished request's Record into stats, metrics, logs and traces.
//
// One entry point per kind of request: Serve (a route served through the
// cache) and Call (an API's own uncached call through the caller). Each
// writes the answer, JSON or a stream, and returns the request's Record.
package flow

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/flow/owners"
	"github.com/breakwater-dev/breakwater/proxy/flow/stored"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// Response headers Breakwater adds.
const (
	HeaderCache      = "X-Breakwater-Cache"
	HeaderSimilarity = "X-Breakwater-Similarity"
	HeaderUpstream   = "X-Breakwater-Upstream"
	HeaderAttempts   = "X-Breakwater-Attempts"
	HeaderCoalesced  = "X-Breakwater-Coalesced"
	// In Go's canonical form (as net/http writes it), so that reading and
	// setting it does not canonicalise, and allocate, on every request.
	HeaderRequestID = "X-Request-Id"
	HeaderThreshold = "X-Breakwater-Threshold"
	HeaderClass     = "X-Breakwater-Class"
)

// Cache outcomes, as sent in X-Breakwater-Cache and counted in /stats.
const (
	OutcomeHitExact    = "hit-exact"
	OutcomeHitSemantic = "hit-semantic"
	OutcomeMiss        = "miss"
	OutcomeBypass      = "bypass"
	OutcomeStale       = "stale"
)

// Cache is what the flow needs of the cache tiers; *cache.Cache implements it.
type Cache interface {
	// Lookup answers a hit, or a miss whose Result.Store writes the fresh
	// answer back with what the lookup learnt (the query's embedding).
	Lookup(ctx context.Context, key cache.Key, opt cache.LookupOptions) (cache.Result, bool)
	Store(ctx context.Context, key cache.Key, e cache.Entry)
	// Promote is given every semantic hit once it has been served (never a
	// sampled one); it keeps the verified ones (cache.Cache.Promote).
	Promote(key cache.Key, res cache.Result)
	Flush(ctx context.Context, partition string) error
	Health() map[string]error
	Stats(ctx context.Context) cache.Stats
}

// Caller is what the flow needs of the upstream caller; *upstream.Caller
// implements it.
type Caller interface {
	Do(ctx context.Context, req *upstream.Request) (*upstream.Response, error)
	Open(ctx context.Context, req *upstream.Request) (*upstream.StreamResponse, error)
	Snapshot() []upstream.ModelStats
}

// Usage is the token counts of one answer (wire.Usage).
type Usage = wire.Usage

// Format is one wire API's cached endpoint (wire.Format).
type Format = *wire.Format

// StreamAssembler follows one stream of a Format (wire.StreamAssembler).
type StreamAssembler = wire.StreamAssembler

// Options configure a Flow; the proxy's Options document each (proxy.New
// fills the defaults).
type Options struct {
	Cache          Cache
	Caller         Caller
	Partitioner    *cache.Partitioner
	EndUserHeader  string
	Group          func(model string) string
	TTL            time.Duration
	MaxTemperature float64
	StaleIfError   bool
	StaleThreshold float32
	Resume         bool
	MaxResumes     int
	IdleTimeout    time.Duration
	MaxStreamBytes int64
	MaxEventBytes  int
	ResponseOwners int
	SharedOwners   owners.Store
	Verify         *Verify
	// Tracing fills upstream.Request.GenAI for the caller's attempt spans;
	// false: no closures on the miss path.
	Tracing bool
	Logger  *slog.Logger
	Now     func() time.Time
	// Hooks hear the flow's upstream calls; a nil hook is nobody.
	Hooks Hooks
}

// Hooks are told what the flow does besides finishing requests (each
// finished request is its Record). A nil field means nobody listens.
type Hooks struct {
	// Call is one upstream call ended: the model it was sent as (the
	// answering one when known), its duration, its error type ("" on
	// success, else the status or "canceled", "stream_cut") and usage.
	Call func(f Format, model string, d time.Duration, errType string, u Usage)
	// FirstChunk is a stream's time to its first relayed chunk.
	FirstChunk func(f Format, model string, d time.Duration)
	// Limit is a request that reached the bound of the setting named.
	Limit func(setting string)
	// Judge is an auto judge's call: its tokens, by the model asked and the
	// tenant's partition, spent on verification.
	Judge func(model, partition string, u Usage)
	// KnownIDs is the number of Responses ids the registry holds.
	KnownIDs func(n int)
}

// Record is what one request did, handed to the subscribers (stats, token
// accounting, metrics, tracing, the access log) once it is answered.
type Record struct {
	RequestID string
	Endpoint  string
	// Model is the model the client asked for ("" when the body named none).
	Model string
	// Partition is the tenant's cache partition ("" with the cache off).
	Partition  string
	Outcome    string
	Status     int
	Similarity float32
	// Target answered the request upstream ("" for none); Attempts it took
	// (also when none answered); Tried what the call did at its targets,
	// its attempts merged (nil without an upstream call, and for a
	// coalesced follower the leader's).
	Target   string
	Attempts int
	Tried    *upstream.Tried
	// Start and End bound the request; Upstream is the time spent waiting
	// for the upstream (or the flight it joined).
	Start, End time.Time
	Upstream   time.Duration
	// Coalesced: answered by another request's upstream call. Called: this
	// request led an upstream call. Failed: the upstream call failed and the
	// caller's error was answered.
	Coalesced, Called, Failed bool
	// Delivered: a 2xx written to a client still connected.
	Delivered bool
	// Usage is the answer's token usage and UsageModel the model that
	// produced it: saved when the request reused it, spent when it led the
	// call.
	Usage      Usage
	UsageModel string
}

// Saved reports whether the request reused an answer whose tokens were
// spent for another (a hit, a stale answer, a coalesced follower).
func (r *Record) Saved() bool {
	switch r.Outcome {
	case OutcomeHitExact, OutcomeHitSemantic, OutcomeStale:
		return true
	}
	return r.Coalesced
}

// Request is one client request to the flow, its body already read within
// the server's limits.
type Request struct {
	HTTP *http.Request
	// ID is the request id the adapter gave it (X-Request-Id).
	ID     string
	Format Format
	// Home is the upstream of the API's requests for a model no route
	// lists ("" = the default upstream).
	Home string
	Body []byte
	// Start is when the request arrived (zero: when the flow took it).
	Start time.Time
}

// Flow answers requests. Build it with New; Close it when done.
type Flow struct {
	opts     Options
	log      *slog.Logger
	flights  *flights
	sflights *streamFlights
	// pumps counts upstream streams still being read, including the write
	// back that follows the client's last byte.
	pumps   atomic.Int64
	calls   atomic.Uint64
	keys    *keyMemo        // nil when the cache is off
	renders *stored.Renders // nil when the cache is off
	// owners remembers which upstream created each Responses id.
	owners *owners.Registry
}

// New builds a Flow from opts, whose defaults the caller has filled.
func New(opts Options) (*Flow, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Group == nil {
		opts.Group = func(m string) string { return m }
	}
	s := &Flow{opts: opts, log: opts.Logger, flights: newFlights(), sflights: newStreamFlights()}
	s.owners = owners.New(opts.ResponseOwners, opts.SharedOwners, opts.Partitioner, opts.Hooks.KnownIDs, opts.Logger)
	if opts.Cache != nil {
		k, err := newKeyMemo()
		if err != nil {
			return nil, err
		}
		s.keys = k
		if s.renders, err = stored.NewRenders(); err != nil {
			k.close()
			return nil, err
		}
	}
	return s, nil
}

// Close releases the flow's memos.
func (s *Flow) Close() {
	if s.keys != nil {
		s.keys.close()
		s.renders.Close()
	}
}

// Calls is how many upstream calls the flow made (one per miss flight or
// stream, whatever the retries inside it).
func (s *Flow) Calls() uint64 { return s.calls.Load() }

// Pumps is how many upstream streams are still being read.
func (s *Flow) Pumps() int64 { return s.pumps.Load() }

// Owners is the Responses ids' owners, which the pass-through shares.
func (s *Flow) Owners() *owners.Registry { return s.owners }

// Waiters is how many clients wait on coalesced non-stream flights.
func (s *Flow) Waiters() int {
	f := s.flights
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, fl := range f.live {
		total += fl.waiters
	}
	return total
}

// StreamWaiters is how many clients listen to streams in flight.
func (s *Flow) StreamWaiters() int {
	f := s.sflights
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, b := range f.live {
		b.mu.Lock()
		total += b.waiters
		b.mu.Unlock()
	}
	return total
}
