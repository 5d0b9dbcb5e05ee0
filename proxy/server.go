// Package proxy serves Breakwater's HTTP surface: the cached flow of every
// registered wire API (proxy/wire), pass-through, health, stats and admin.
package proxy

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/breakwater-dev/breakwater/proxy/observe"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// Response headers Breakwater adds (the flow's, and the namespace a
// client may send).
const (
	HeaderCache      = flow.HeaderCache
	HeaderSimilarity = flow.HeaderSimilarity
	HeaderUpstream   = flow.HeaderUpstream
	HeaderAttempts   = flow.HeaderAttempts
	HeaderRequestID  = flow.HeaderRequestID
	HeaderNamespace  = "X-Breakwater-Namespace"
	HeaderThreshold  = flow.HeaderThreshold
	HeaderClass      = flow.HeaderClass
)

// Cache outcomes, as sent in X-Breakwater-Cache and counted in /stats.
const (
	OutcomeHitExact    = flow.OutcomeHitExact
	OutcomeHitSemantic = flow.OutcomeHitSemantic
	OutcomeMiss        = flow.OutcomeMiss
	OutcomeBypass      = flow.OutcomeBypass
	OutcomeStale       = flow.OutcomeStale
)

// Cache is what the proxy needs of the cache tiers (flow.Cache);
// *cache.Cache implements it.
type Cache = flow.Cache

// Caller is what the proxy needs of the upstream caller (flow.Caller);
// *upstream.Caller implements it.
type Caller = flow.Caller

// Options configure a Server. Zero values are documented per field.
type Options struct {
	// Cache holds the exact and semantic tiers. Nil disables caching: every
	// request is forwarded and answered "bypass".
	Cache Cache
	// Caller sends misses upstream. Required.
	Caller Caller
	// FleetStats, when set, is the fleet's part of /stats ("fleet": the
	// budgets and Redis, fleet.Stats). Nil: none.
	FleetStats func() any
	// Partitioner says which tenant a request belongs to. Nil means one
	// shared partition for everybody (only for tests and explicit opt-in).
	Partitioner *cache.Partitioner
	// Group maps a requested model to its cache group (models that may share
	// answers). Nil: the model name itself.
	Group func(model string) string
	// Models are the names /v1/models lists (the configured routes).
	Models []string
	// Passthrough is the default upstream's API root (including /v1) for
	// the /v1/* paths that are forwarded without caching. Nil answers 404.
	Passthrough *url.URL
	// PassthroughKey replaces the client's credential headers on pass-through
	// when set, sent in the PassthroughAuth style (upstream.AuthBearer when
	// ""); empty forwards the client's headers as sent.
	PassthroughKey  string
	PassthroughAuth string
	// Upstreams are the pass-through targets by upstream name (the caller's
	// Response.Upstream): an API's requests it claims outside its cached
	// routes go to its home upstream's (APIUpstreams), and requests naming
	// an answer id go to the upstream that created the id
	// (ownerfwd.go). Nil, or an upstream missing here: they go to
	// Passthrough.
	Upstreams map[string]PassthroughTarget
	// ResponseOwners bounds how many Responses ids the proxy remembers the
	// upstream of. Zero: DefaultResponseOwners.
	ResponseOwners int
	// SharedOwners, when set, is where replicas share the Responses ids'
	// owners (the Qdrant collection of a fleet): an id learnt here is
	// written there before the answer reaches the client, and an id not
	// known here is looked up there. Nil: this process's registry only.
	SharedOwners OwnerStore
	// APIs are the wire APIs served (proxy/wire/apis.All), mounted in this
	// order; the first one without a Claims is the default API. Required.
	APIs []wire.API
	// APIUpstreams names each API's home upstream by the API's name: the
	// upstream (Caller's Request.Upstream) its requests go to when no route
	// lists their model, and whose pass-through target (Upstreams) takes the
	// requests it claims outside its routes. A model an operator has not
	// listed belongs to the provider whose API the client speaks, not to the
	// default upstream. Missing or "": the default upstream.
	APIUpstreams map[string]string
	// Transport is used for pass-through. Nil: http.DefaultTransport.
	Transport http.RoundTripper
	// ServerOptions are the HTTP server's limits ([server]).
	ServerOptions
	// TTL is how long a stored entry is served. Zero: 24h.
	TTL time.Duration
	// CacheOptions are what the proxy reads of [cache].
	CacheOptions
	// StreamOptions are the handling of streamed answers ([stream]).
	StreamOptions
	// MaxResumes bounds resumptions of one stream. Zero: 2.
	MaxResumes int
	// AdminToken protects /admin/*. Empty: /admin/* refuses every request,
	// unless AdminAllowNoToken.
	AdminToken string
	// Logger receives one line per request. Nil: slog.Default().
	Logger *slog.Logger
	// Metrics records Prometheus metrics. Nil: none.
	Metrics *Metrics
	// Verify measures the live false-hit rate (proxy/flow/verify.go). Nil: no estimate.
	Verify *Verify
	// Prices are USD per million tokens by the upstream model that produced
	// an answer (upstream.Response.Model): /stats shows the cost of the
	// tokens saved and spent for the models listed. Nil: tokens alone.
	Prices map[string]Price
	// TracerProvider records a server span per request, spans for the
	// lookup's embedding, search and judge, and passes the trace upstream
	// (W3C traceparent). Nil: tracing off.
	TracerProvider trace.TracerProvider
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// ServerOptions are the HTTP server's limits; they are also the
// configuration file's [server] keys of the proxy (the toml tags; the zero
// tag is what the file's 0 means: "refused", a negative value Validate
// refuses, or the text of "none", the option's negative value, where a
// negative value written is refused).
type ServerOptions struct {
	// MaxBodyBytes caps a request body; larger bodies get 413. Default
	// 4 MiB (DefaultMaxBodyBytes). 0 in the file (a negative value here):
	// no limit.
	MaxBodyBytes int64 `toml:"max_body_bytes" unit:"bytes" zero:"0: no limit"`
	// MaxBodyBytesInFlight caps the request bodies the cached endpoints hold
	// at once; a request that does not fit gets 503 + Retry-After. Default
	// 64 MiB (DefaultMaxBodyBytesInFlight). 0 in the file (a negative value
	// here): no limit.
	MaxBodyBytesInFlight int64 `toml:"max_body_bytes_in_flight" unit:"bytes" zero:"0: no limit"`
	// ReadHeaderTimeout bounds reading a request's headers (slowloris).
	// Default 10s (DefaultReadHeaderTimeout); Validate refuses a negative
	// one. It, ReadTimeout and ConnIdleTimeout go to the *http.Server built
	// by HTTPServer.
	ReadHeaderTimeout time.Duration `toml:"read_header_timeout" zero:"refused"`
	// ReadTimeout bounds reading a whole request, body included. Default
	// 30s (DefaultReadTimeout). 0 in the file (a negative value here): none.
	ReadTimeout time.Duration `toml:"read_timeout" zero:"0: none"`
	// WriteTimeout bounds each write to a client (each chunk of a stream
	// has its own). Default 30s (DefaultWriteTimeout). 0 in the file (a
	// negative value here): none.
	WriteTimeout time.Duration `toml:"write_timeout" zero:"0: none"`
	// ConnIdleTimeout closes keep-alive connections idle this long
	// ([server] idle_timeout). Default 60s (DefaultIdleTimeout). 0 in the
	// file (a negative value here): none.
	ConnIdleTimeout time.Duration `toml:"idle_timeout" zero:"0: none"`
	// MaxConnections caps the connections Listener serves at once; at the
	// cap the quietest connection is closed for a new one, and when none is
	// quiet more wait to be accepted. Default 1024 (DefaultMaxConnections).
	// 0 in the file (a negative value here): no limit.
	MaxConnections int `toml:"max_connections" zero:"0: no limit"`
	// AdminAllowNoToken lets loopback clients use /admin/* when no admin
	// token is set (an explicit opt-in: behind a reverse proxy on the same
	// host, every client is loopback). Default false.
	AdminAllowNoToken bool `toml:"admin_allow_no_token"`
}

// DefaultServerOptions is ServerOptions at the defaults, as a
// configuration file without the keys has them.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{MaxBodyBytes: DefaultMaxBodyBytes, MaxBodyBytesInFlight: DefaultMaxBodyBytesInFlight,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, ReadTimeout: DefaultReadTimeout, WriteTimeout: DefaultWriteTimeout,
		ConnIdleTimeout: DefaultIdleTimeout, MaxConnections: DefaultMaxConnections}
}

// CacheOptions are what the proxy decides of caching; they are also the
// configuration file's [cache] keys of the proxy (the toml tags; the zero
// tag is what the file's 0 means: "refused", a negative value Validate
// refuses).
type CacheOptions struct {
	// EndUserHeader names a request header carrying the end user's
	// identity, for every API (Gemini's requests carry none in the body);
	// when present it is the end user, over the body's fields (OpenAI
	// safety_identifier and user, Anthropic metadata.user_id;
	// cache.Key.EndUser). Default "": the body's fields only. Only a keyed
	// hash of the identity is kept (docs/SECURITY.md).
	EndUserHeader string `toml:"end_user_header"`
	// MaxTemperature: requests whose temperature is above it bypass the
	// cache (neither read nor written: their answers are meant to vary). A
	// request without temperature counts as 1.0, the APIs' default.
	// Default 1.0 in the configuration (DefaultMaxTemperature), so only
	// deliberately creative requests bypass; 0 (the option's zero too)
	// caches only deterministic requests. Validate refuses a value outside
	// [0, 2], the APIs' range.
	MaxTemperature float64 `toml:"max_temperature"`
	// StaleIfError serves the best near match (down to StaleThreshold, and
	// expired entries) when every target is open or failing, with
	// X-Breakwater-Cache: stale. Default true in the configuration; the
	// option's zero is false.
	StaleIfError bool `toml:"stale_if_error"`
	// StaleThreshold is the minimum similarity for a stale answer, in
	// (0, 1] and at most [cache] threshold. Default 0.85 in the
	// configuration (DefaultStaleThreshold); the option's zero: the cache's
	// threshold.
	StaleThreshold float32 `toml:"stale_threshold" zero:"refused"`
	// StoreMaxTokens also stores answers cut by the output-token limit
	// (wire.Host.StoreMaxTokens, for the APIs that tell such answers apart:
	// Gemini's finishReason MAX_TOKENS). Default false: only answers that
	// stopped by themselves (STOP) are stored; SAFETY, RECITATION,
	// BLOCKLIST and errors never are.
	StoreMaxTokens bool `toml:"store_max_tokens"`
}

// DefaultCacheOptions is CacheOptions at the defaults, as a configuration
// file without the keys has them.
func DefaultCacheOptions() CacheOptions {
	return CacheOptions{MaxTemperature: DefaultMaxTemperature, StaleIfError: true, StaleThreshold: DefaultStaleThreshold}
}

// StreamOptions are the handling of streamed (SSE) answers; they are also
// the configuration file's [stream] keys (the toml tags; the zero tag is
// what the file's 0 means: "none", the option's negative value, and a
// negative value written is refused).
type StreamOptions struct {
	// Resume continues a stream cut after its first byte on the next target
	// (partial answer sent as an assistant prefix); false sends the client
	// an SSE error event instead. Default true in the configuration
	// (DefaultStreamOptions); the option's zero is false.
	Resume bool `toml:"resume"`
	// IdleTimeout is the longest gap between two chunks of an upstream
	// stream before it counts as cut. Default 30s
	// (DefaultStreamIdleTimeout). 0 in the file (a negative value here)
	// disables it (retry.deadline still applies).
	IdleTimeout time.Duration `toml:"idle_timeout" zero:"0 disables it"`
	// MaxStreamBytes caps one upstream stream (resumed parts included);
	// beyond it the client gets an SSE error event and nothing is cached.
	// Default 16 MiB (DefaultMaxStreamBytes). 0 in the file (a negative
	// value here): no limit.
	MaxStreamBytes int64 `toml:"max_bytes" unit:"bytes" zero:"0: no limit"`
	// MaxEventBytes caps one SSE event of an upstream stream, as
	// MaxStreamBytes does. Default 1 MiB (DefaultMaxEventBytes). 0 in the
	// file (a negative value here): no limit.
	MaxEventBytes int `toml:"max_event_bytes" unit:"bytes" zero:"0: no limit"`
}

// DefaultStreamOptions is StreamOptions at the defaults, as a
// configuration file without the keys has them.
func DefaultStreamOptions() StreamOptions {
	return StreamOptions{Resume: true, IdleTimeout: DefaultStreamIdleTimeout,
		MaxStreamBytes: DefaultMaxStreamBytes, MaxEventBytes: DefaultMaxEventBytes}
}

// Server is the HTTP front of Breakwater: routes, limits, the APIs' mounting
// and headers; the flow (proxy/flow) answers the requests of the cached
// routes, and every finished request's Record goes to the subscribers
// (finished.go).
type Server struct {
	opts     Options
	echo     *echo.Echo
	log      *slog.Logger
	stats    *counters
	flow     *flow.Flow
	obs      *observe.Observer
	stop     chan struct{}
	stopOnce sync.Once
	fwd      *httputil.ReverseProxy
	// apis are the registered wire APIs; defaultErrors is the error shape
	// of a request none of them claims.
	apis          []*mountedAPI
	defaultErrors Format
	// idFormats are the registered Formats whose answers carry ids
	// (wire.Format.ResponseID), for the creates passed through.
	idFormats []Format
	ready     atomic.Bool
	bodySem   *semaphore.Weighted // nil: no limit

	tracer trace.Tracer // nil: tracing off
	// ownerFwd is the pass-through of each upstream of Options.Upstreams.
	ownerFwd map[string]*httputil.ReverseProxy
}

// DefaultTTL is how long a cached answer is served.
const DefaultTTL = 24 * time.Hour

// New builds a Server. It is not ready until SetReady(true).
func New(opts Options) (*Server, error) {
	if opts.Caller == nil {
		return nil, errorf("new proxy: a Caller is required")
	}
	if err := opts.Validate(); err != nil {
		return nil, errorf("new proxy: %w", err)
	}
	switch {
	case opts.MaxBodyBytes == 0:
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	case opts.MaxBodyBytes < 0:
		opts.MaxBodyBytes = noBodyLimit
	}
	defDur := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	defDur(&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defDur(&opts.ReadTimeout, DefaultReadTimeout)
	defDur(&opts.ConnIdleTimeout, DefaultIdleTimeout)
	defDur(&opts.WriteTimeout, DefaultWriteTimeout)
	if opts.MaxBodyBytesInFlight == 0 {
		opts.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxStreamBytes == 0 {
		opts.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if opts.MaxEventBytes == 0 {
		opts.MaxEventBytes = DefaultMaxEventBytes
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxResumes == 0 {
		opts.MaxResumes = 2
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultStreamIdleTimeout
	}
	if opts.Group == nil {
		opts.Group = func(m string) string { return m }
	}
	s := &Server{opts: opts, log: opts.Logger, stats: newCounters(), obs: observe.New(opts.Prices, opts.Metrics, opts.Now),
		stop: make(chan struct{}), bodySem: newBodySem(opts.MaxBodyBytesInFlight)}
	if opts.Passthrough != nil {
		s.fwd = s.newForwarder(opts.Passthrough, opts.PassthroughKey, opts.PassthroughAuth)
	}
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer("github.com/breakwater-dev/breakwater/proxy")
	}
	var err error
	s.flow, err = flow.New(flow.Options{
		Cache: opts.Cache, Caller: opts.Caller, Partitioner: opts.Partitioner, EndUserHeader: opts.EndUserHeader,
		Group: opts.Group, TTL: opts.TTL, MaxTemperature: opts.MaxTemperature,
		StaleIfError: opts.StaleIfError, StaleThreshold: opts.StaleThreshold,
		Resume: opts.Resume, MaxResumes: opts.MaxResumes, IdleTimeout: opts.IdleTimeout,
		MaxStreamBytes: opts.MaxStreamBytes, MaxEventBytes: opts.MaxEventBytes,
		ResponseOwners: opts.ResponseOwners, SharedOwners: opts.SharedOwners, Verify: opts.Verify,
		Tracing: s.tracer != nil, Logger: opts.Logger, Now: opts.Now, Hooks: s.obs.Hooks(),
	})
	if err != nil {
		return nil, errorf("new proxy: %w", err)
	}
	s.ownerFwd = s.newOwnerForwarders(opts.Upstreams)
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = httpErrorHandler
	e.Use(s.deadlines, s.requestID)

	if err := s.mountAPIs(e, opts.APIs); err != nil {
		s.Close()
		return nil, err
	}
	e.Any("/v1/*", s.modelRoute(s.handleForward))
	e.GET("/healthz", s.handleHealthz)
	e.GET("/readyz", s.handleReadyz)
	e.GET("/stats", s.handleStats)
	e.GET("/dashboard", s.handleDashboard)
	admin := e.Group("/admin", s.adminAuth)
	admin.DELETE("/cache", s.handleFlush)
	s.echo = e
	go s.sampleLoop()
	return s, nil
}

// Close stops the server's background sampling. Safe to call twice.
func (s *Server) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.flow.Close()
	})
}

// sampleLoop folds the caller's per-target counters into the rolling
// windows every few seconds, so rates are placed in the right minute even
// when nobody polls /stats.
func (s *Server) sampleLoop() {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.sampleTargets()
		case <-s.stop:
			return
		}
	}
}

func (s *Server) sampleTargets() {
	cum := map[string]observe.TargetCum{}
	for _, m := range s.opts.Caller.Snapshot() {
		for _, t := range m.Targets {
			cum[t.Name] = observe.TargetCum{Sent: t.Sent, RateLimited: t.RateLimited, Capacity: t.RateLimited + t.Shed}
		}
	}
	s.obs.SampleTargets(s.opts.Now(), cum)
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Echo exposes the router so main can mount more routes (metrics, dashboard).
func (s *Server) Echo() *echo.Echo { return s.echo }

// SetReady flips /readyz; main sets it false first thing on shutdown so load
// balancers stop sending traffic before connections are drained.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// requestID echoes or generates X-Request-ID and puts a logger carrying it
// in the request context, so every line of the request has the same ID.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(HeaderRequestID)
		if id == "" || len(id) > 128 {
			id = newID()
			req.Header.Set(HeaderRequestID, id)
		}
		h := c.Response().Header()
		h.Set(HeaderRequestID, id)
		c.Set("request_id", id)
		c.Set(serverCtxKey, s)
		return next(c)
	}
}

var bypassValue = []string{OutcomeBypass}

// countedKey marks a request whose outcome /stats has counted.
const countedKey = "breakwater.counted"

// modelRoute wraps every model-API route (cached, an API's own handlers,
// pass-through): its response says whether the cache answered, "bypass"
// until the flow names another outcome, and every response that says so is
// counted in /stats once. A request answered before the flow counted it (a
// body too large, not JSON, an unknown field, a bad header, a 503 of the
// body budget) is counted here as the bypass its header says. Shared slice:
// net/http only reads it. Administrative and metrics endpoints are not
// wrapped and carry no outcome.
func (s *Server) modelRoute(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header()[HeaderCache] = bypassValue
		err := next(c)
		if c.Get(countedKey) == nil {
			s.countBypass(c)
		}
		return err
	}
}

// count records the outcome of a model-API request in /stats, and marks it
// counted so modelRoute does not count it again.
func (s *Server) count(c echo.Context, outcome string) {
	c.Set(countedKey, true)
	s.stats.outcome(outcome)
}

// countBypass counts a request answered without the cache and without the
// cached flow's finish (a pass-through, an error before the lookup), in
// /stats and its rolling windows.
func (s *Server) countBypass(c echo.Context) {
	s.count(c, OutcomeBypass)
	s.obs.Answered(s.opts.Now())
}

func (s *Server) logger(c echo.Context) *slog.Logger {
	return s.log.With("request_id", requestIDOf(c))
}

// requestIDOf is the id the requestID middleware gave the request.
func requestIDOf(c echo.Context) string {
	id, _ := c.Get("request_id").(string)
	return id
}

func (s *Server) adminAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.AdminToken != "" {
			got := strings.TrimPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.AdminToken)) != 1 {
				return writeError(c, http.StatusUnauthorized, "unauthorized", "breakwater: /admin needs Authorization: Bearer <token> (the token is in the variable named by server.admin_token_env)", 0)
			}
			return next(c)
		}
		if !s.opts.AdminAllowNoToken {
			return writeError(c, http.StatusForbidden, "forbidden", "breakwater: /admin is off: no admin token is configured (set the variable named by server.admin_token_env, or server.admin_allow_no_token = true for loopback clients)", 0)
		}
		host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			return writeError(c, http.StatusForbidden, "forbidden", "breakwater: /admin answers only loopback clients when no admin token is configured (set the variable named by server.admin_token_env)", 0)
		}
		return next(c)
	}
}

func (s *Server) handleHealthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 200 while serving, naming degraded tiers: a down
// index or embedder degrades the cache but requests are still served. An
// index still opening is degraded too, and also listed under "loading": it
// is expected to become ready on its own.
func (s *Server) handleReadyz(c echo.Context) error {
	if !s.ready.Load() {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"status": "not ready"})
	}
	degraded := map[string]string{}
	var loading []string
	if s.opts.Cache != nil {
		if r, ok := s.opts.Cache.(interface{ Recheck(context.Context) }); ok && len(s.opts.Cache.Health()) > 0 {
			ctx, cancel := context.WithTimeout(c.Request().Context(), time.Second)
			r.Recheck(ctx)
			cancel()
		}
		for tier, err := range s.opts.Cache.Health() {
			if err != nil {
				degraded[tier] = err.Error()
			}
			if errors.Is(err, cache.ErrIndexOpening) {
				loading = append(loading, tier)
			}
		}
	}
	if len(loading) > 0 {
		return c.JSON(http.StatusOK, map[string]any{"status": "degraded", "degraded": degraded, "loading": loading})
	}
	if len(degraded) > 0 {
		return c.JSON(http.StatusOK, map[string]any{"status": "degraded", "degraded": degraded})
	}
	return c.JSON(http.StatusOK, map[string]any{"status": "ready"})
}

func (s *Server) handleFlush(c echo.Context) error {
	if s.opts.Cache == nil {
		return c.JSON(http.StatusOK, map[string]any{"flushed": "nothing: cache disabled"})
	}
	p := c.QueryParam("partition")
	if err := s.opts.Cache.Flush(c.Request().Context(), p); err != nil {
		return writeError(c, http.StatusInternalServerError, "flush_failed", "breakwater: flush cache: "+err.Error(), 0)
	}
	what := p
	if what == "" {
		what = "all"
	}
	s.logger(c).Info("cache flushed", "partition", what)
	return c.JSON(http.StatusOK, map[string]any{"flushed": what})
}
