// Package app is Breakwater's composition root: it turns a config.Config into
// the constructors of cache, embed and proxy, runs the server and shuts it
// down in order. Only main (and tests) import it; library packages never see
// the config file.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/embed"
	bwfleet "github.com/breakwater-dev/breakwater/fleet"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire/apis"
)

// App is a wired, not yet serving, Breakwater.
type App struct {
	cfg *config.Config
	// prober is the OpenAI-compatible embedder whose vector length the
	// index opener learns with one call (embed.openai.dimensions unset).
	prober   *embed.OpenAI
	log      *slog.Logger
	registry *prometheus.Registry
	cache    *cache.Cache
	verify   *verifyParts
	server   *proxy.Server
	http     *http.Server
	// adminHTTP serves /stats, /metrics, /dashboard and /admin/* on
	// adminLn when server.admin_listen is set; nil otherwise.
	adminHTTP *http.Server
	adminLn   net.Listener
	closers   []func() error
	once      sync.Once
	// tracer exports OpenTelemetry traces; nil when tracing is off.
	tracer *sdktrace.TracerProvider
	// secretFP is cache.SecretFingerprint of the partition secret, recorded
	// in a shared (Qdrant) collection.
	secretFP string
	// refused receives why a shared index cannot be used by this replica
	// (another partition secret, embedder, dimension or portable_vectors):
	// Serve stops and returns it, so the replica refuses to run instead of
	// sharing a collection it cannot share a cache through.
	refused chan error
	// owners is the fleet's Responses-id registry in Qdrant (nil for the
	// embedded index: one pod needs none beyond the proxy's own).
	owners *sharedOwners
	// fleet holds the budgets and the link to Redis (nil: no [[budgets]]
	// and no [fleet] redis_url).
	fleet *bwfleet.Fleet
}

// cacheTracer is the tracer of the lookup's spans; nil when tracing is off.
func (a *App) cacheTracer() trace.Tracer {
	if a.tracer == nil {
		return nil
	}
	return a.tracer.Tracer(tracerName)
}

// Options are what main hands over besides the config.
type Options struct {
	// Logger receives every log line. Nil: slog.Default().
	Logger *slog.Logger
	// Env looks up environment variables (keys named by *_env settings).
	// Nil: os.Getenv.
	Env func(string) string
}

// New builds every component from cfg. It does not listen yet.
func New(ctx context.Context, cfg *config.Config, opts Options) (*App, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	a := &App{cfg: cfg, log: opts.Logger, registry: prometheus.NewRegistry(), refused: make(chan error, 1)}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var err error
	if a.tracer, err = newTracerProvider(ctx, cfg, opts.Env); err != nil {
		return nil, err
	}
	var tp trace.TracerProvider
	if a.tracer != nil {
		tp = a.tracer
		// Closed last (closers run in reverse): spans of the shutdown are sent.
		a.closers = append(a.closers, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return a.tracer.Shutdown(ctx)
		})
	}
	caller, err := newCaller(cfg, opts, a.registry, tp, a.seed(), a.gate())
	if err != nil {
		a.closeAll()
		return nil, err
	}
	var c *cache.Cache
	var partitioner *cache.Partitioner
	if cfg.Cache.Enabled {
		c, partitioner, err = a.newCache(ctx, opts, caller)
		if err != nil {
			a.closeAll()
			return nil, err
		}
		a.cache = c
	}
	popts, err := proxyOptions(cfg, opts, caller, partitioner)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	if c != nil {
		popts.Cache = c
	}
	if err := a.addFleet(&popts, partitioner); err != nil {
		a.closeAll()
		return nil, err
	}
	if a.owners != nil {
		popts.SharedOwners = a.owners
	}
	popts.Metrics = proxy.NewMetrics(a.registry)
	popts.TracerProvider = tp
	popts.Verify = a.verify.proxyVerify()
	srv, err := proxy.New(popts)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	srv.Echo().GET("/metrics", echoHandler(promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})))
	srv.Echo().GET("/", a.handleRoot)
	a.server = srv
	a.http = srv.HTTPServer(cfg.Server.Listen)
	a.http.ErrorLog = slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)
	if err := a.listenAdmin(); err != nil {
		a.closeAll()
		return nil, err
	}
	return a, nil
}

// Handler is the wired HTTP handler (for tests that serve it themselves).
func (a *App) Handler() http.Handler { return a.server.Handler() }

// IndexOpened is closed once the vector index has opened, or failed to
// (Serve does not wait for it; see cache.Options.OpenIndex).
func (a *App) IndexOpened() <-chan struct{} {
	if a.cache == nil {
		return closedChan
	}
	return a.cache.Opened()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Refused receives (once) why this replica cannot share the configured
// Qdrant collection; Serve returns it. For tests that do not call Serve.
func (a *App) Refused() <-chan error { return a.refused }

// refuse hands err to Serve; only the first reason is kept.
func (a *App) refuse(err error) {
	select {
	case a.refused <- err:
	default:
	}
}

// Server is the proxy (for tests).
func (a *App) Server() *proxy.Server { return a.server }

// Serve listens on ln until ctx is cancelled, then shuts down gracefully:
// readiness false, drain connections, flush pending index writes, close
// stores.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	a.server.SetReady(true)
	a.log.Info("breakwater serving", a.startLine(ln.Addr().String())...)
	errc := make(chan error, 1)
	go func() { errc <- a.http.Serve(a.server.Listener(ln)) }()
	a.serveAdmin()
	select {
	case err := <-errc:
		a.Shutdown(context.Background())
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case err := <-a.refused:
		a.Shutdown(context.Background())
		return fmt.Errorf("refusing to run: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout.D())
	defer cancel()
	return a.Shutdown(sctx)
}

// Shutdown stops serving and flushes state. Safe to call twice.
func (a *App) Shutdown(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		a.server.SetReady(false)
		a.log.Info("shutting down: draining connections")
		if e := a.http.Shutdown(ctx); e != nil {
			err = fmt.Errorf("shutdown http: %w", e)
		}
		if e := a.shutdownAdmin(ctx); e != nil && err == nil {
			err = e
		}
		a.server.Close()
		a.closeAll()
		a.log.Info("shutdown complete")
	})
	return err
}

func (a *App) closeAll() {
	if a.cache != nil {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Server.ShutdownTimeout.D())
		if err := a.cache.Close(ctx); err != nil {
			a.log.Warn("flush index writes", "err", err)
		}
		cancel()
	}
	if a.adminLn != nil {
		_ = a.adminLn.Close() // already closed when it was served
	}
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("close", "err", err)
		}
	}
	a.closers = nil
}

func newCaller(cfg *config.Config, opts Options, reg prometheus.Registerer, tp trace.TracerProvider, seed func(string) (float64, time.Duration), gate upstream.Gate) (*upstream.Caller, error) {
	uo := upstream.Options{
		TracerProvider:  tp,
		DefaultUpstream: cfg.DefaultUpstream,
		Retry:           cfg.Retry,
		Breaker:         cfg.Breaker,
		AnswerBound:     cfg.Server.AnswerBound,
		StreamBound:     cfg.Stream.StreamBound,
		Metrics:         upstream.NewMetrics(reg),
		Logger:          opts.Logger,
		Seed:            seed,
		Gate:            gate,
	}
	for _, u := range cfg.Upstreams {
		if u.APIKeyEnv != "" {
			if u.APIKey = opts.Env(u.APIKeyEnv); u.APIKey == "" {
				return nil, fmt.Errorf("config: upstreams %q api_key_env = %q: the variable is not set (unset api_key_env to forward the client's Authorization instead)", u.Name, u.APIKeyEnv)
			}
		}
		uo.Upstreams = append(uo.Upstreams, u.Upstream)
	}
	for _, m := range cfg.Models {
		uo.Routes = append(uo.Routes, m.Route)
	}
	c, err := upstream.New(uo)
	if err != nil {
		return nil, fmt.Errorf("build upstream caller: %w", err)
	}
	return c, nil
}

func proxyOptions(cfg *config.Config, opts Options, caller *upstream.Caller, p *cache.Partitioner) (proxy.Options, error) {
	groups := map[string]string{}
	models := make([]string, 0, len(cfg.Models))
	for _, m := range cfg.Models {
		groups[m.Name] = m.CacheGroup
		models = append(models, m.Name)
	}
	po := cfg.ProxyOptions()
	po.Caller, po.Partitioner, po.Models, po.Logger = caller, p, models, opts.Logger
	po.Group = func(model string) string {
		if g, ok := groups[model]; ok {
			return g
		}
		return model
	}
	if prices := cfg.ModelPrices(); len(prices) > 0 {
		po.Prices = make(map[string]proxy.Price, len(prices))
		for name, p := range prices {
			po.Prices[name] = proxy.Price{Input: p.Input, Output: p.Output}
		}
	}
	if cfg.Server.AdminTokenEnv != "" {
		po.AdminToken = opts.Env(cfg.Server.AdminTokenEnv)
	}
	po.APIs = apis.All
	po.APIUpstreams = cfg.APIUpstreams
	// The default upstream's pass-through root, with its own key if it
	// holds one.
	if u, ok := cfg.Upstream(cfg.DefaultUpstream); ok {
		root, err := url.Parse(u.BaseURL)
		if err != nil {
			return po, fmt.Errorf("config: upstreams %q base_url = %q: %w", u.Name, u.BaseURL, err)
		}
		po.Passthrough = root
		if u.APIKeyEnv != "" {
			po.PassthroughKey, po.PassthroughAuth = opts.Env(u.APIKeyEnv), u.Auth
		}
	}
	// Every upstream's pass-through: the APIs' home upstreams', and for the
	// answer ids each created.
	po.Upstreams = make(map[string]proxy.PassthroughTarget, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		root, err := url.Parse(u.BaseURL)
		if err != nil {
			return po, fmt.Errorf("config: upstreams %q base_url = %q: %w", u.Name, u.BaseURL, err)
		}
		t := proxy.PassthroughTarget{Root: root}
		if u.APIKeyEnv != "" {
			t.Key, t.Auth = opts.Env(u.APIKeyEnv), u.Auth
		}
		po.Upstreams[u.Name] = t
	}
	return po, nil
}

// waitTimeout is how long start-up waits for a remote index or embedder
// before starting degraded.
const waitTimeout = 5 * time.Second
