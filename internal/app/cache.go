package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/cache/qdrant"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/embed"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// newCache builds the exact tier, the embedder and the partitioner, and has
// the cache open the vector index in the background: a large embedded store
// takes seconds to load and Qdrant's collection check waits on the network,
// and neither holds up listening. Until the index is open, or when it cannot
// be opened or a remote index or embedder is down, Breakwater serves degraded
// (exact tier + forwarding) and /readyz says so.
func (a *App) newCache(ctx context.Context, opts Options, caller *upstream.Caller) (*cache.Cache, *cache.Partitioner, error) {
	cfg := a.cfg
	secret, err := partitionSecret(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	a.secretFP = cache.SecretFingerprint(secret)
	part, err := cache.NewPartitioner(secret, cfg.Cache.PartitionBy)
	if err != nil {
		return nil, nil, fmt.Errorf("config: cache.partition_by: %w", err)
	}
	var exact *cache.Exact
	if cfg.Cache.ExactMaxBytes > 0 {
		exact, err = cache.NewExact(int64(cfg.Cache.ExactMaxBytes))
		if err != nil {
			return nil, nil, fmt.Errorf("build exact tier: %w", err)
		}
		a.closers = append(a.closers, func() error { exact.Close(); return nil })
	}
	emb, err := a.newEmbedder(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	co := cfg.Cache.Options
	co.Exact, co.Logger, co.Guard = exact, a.log, guard.New(guard.Options{}).Check
	co.CrossUser = cfg.Cache.Semantic.CrossUser
	// End users are hashed under the partition secret, so their hashes
	// survive restarts and agree between replicas sharing an index.
	co.UserSecret = secret
	if emb != nil && cfg.Vector.Backend == config.BackendQdrant {
		a.owners = &sharedOwners{}
	}
	if emb != nil {
		m := newCacheMetrics(a.registry)
		co.OpenIndex = func(ctx context.Context) (cache.Index, error) {
			if err := a.probeDimension(ctx); err != nil {
				return nil, err
			}
			index, err := a.newIndex(ctx, emb, opts)
			if err != nil {
				if cfg.Vector.Backend == config.BackendQdrant && refusal(err) {
					a.refuse(err)
				}
				return nil, err
			}
			return timedIndex{Index: index, m: m, tr: a.cacheTracer()}, nil
		}
		co.Embedder = timedEmbedder{Embedder: emb, m: m, tr: a.cacheTracer()}
	}
	a.verify, err = newVerify(cfg, opts, caller, emb, verify.NewMetrics(a.registry))
	if err != nil {
		return nil, nil, err
	}
	a.closers = append(a.closers, func() error { a.verify.verifier.Close(); return nil })
	if emb != nil {
		co.Verifier = a.verify.verifier
		if tr := a.cacheTracer(); tr != nil {
			co.Verifier = tracedVerifier{Verifier: a.verify.verifier, tr: tr}
		}
		if a.verify.verifier.Enabled() {
			co.JudgedGuard = guard.New(guard.Options{MaxUnmatched: verify.DefaultGuardSlack}).Check
		}
	}
	c := cache.New(co)
	registerCacheStats(a.registry, c)
	return c, part, nil
}

func partitionSecret(cfg *config.Config, opts Options) ([]byte, error) {
	if cfg.Cache.PartitionSecretEnv != "" {
		if v := opts.Env(cfg.Cache.PartitionSecretEnv); v != "" {
			if len(v) < cache.MinSecretLen {
				return nil, fmt.Errorf("config: cache.partition_secret_env = %q: the secret in that variable is %d bytes; use at least %d", cfg.Cache.PartitionSecretEnv, len(v), cache.MinSecretLen)
			}
			return []byte(v), nil
		}
	}
	if err := os.MkdirAll(cfg.Cache.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("config: cache.data_dir = %q: %w", cfg.Cache.DataDir, err)
	}
	s, err := cache.LoadOrCreateSecret(cfg.Cache.DataDir)
	if err != nil {
		return nil, fmt.Errorf("config: cache.data_dir = %q: %w", cfg.Cache.DataDir, err)
	}
	return s, nil
}

func (a *App) newEmbedder(ctx context.Context, opts Options) (embed.Embedder, error) {
	cfg := a.cfg
	var e embed.Embedder
	switch cfg.Embed.Provider {
	case config.ProviderBuiltin:
		newBuiltin := embed.NewBuiltin
		if cfg.Embed.PortableVectors {
			newBuiltin = embed.NewBuiltinPortable
		}
		b, err := newBuiltin()
		if err != nil {
			return nil, fmt.Errorf("load built-in encoder: %w", err)
		}
		e = b
	case config.ProviderOpenAI:
		o := cfg.Embed.OpenAI
		eo := o.OpenAIOptions
		eo.APIKey = envOr(opts.Env, o.APIKeyEnv)
		oe, err := embed.NewOpenAI(eo)
		if err != nil {
			return nil, fmt.Errorf("config: embed.openai: %w", err)
		}
		if o.Dimensions == 0 {
			// The vector length is learnt from one call; the index opener
			// makes it (probeDimension), in the background like the rest of
			// the open, so an endpoint that is down at start delays the
			// semantic tier, not listening, and does not turn it off.
			a.prober = oe
		}
		e = oe
	default:
		return nil, fmt.Errorf("config: embed.provider = %q: must be %q or %q", cfg.Embed.Provider, config.ProviderBuiltin, config.ProviderOpenAI)
	}
	if cfg.Embed.CacheBytes > 0 {
		c, err := embed.NewCached(e, int64(cfg.Embed.CacheBytes))
		if err != nil {
			return nil, fmt.Errorf("build embedding cache: %w", err)
		}
		a.closers = append(a.closers, func() error { c.Close(); return nil })
		return c, nil
	}
	return e, nil
}

// newIndex opens the configured index; the cache runs it in the background
// and closes what it returns.
func (a *App) newIndex(ctx context.Context, emb embed.Embedder, opts Options) (cache.Index, error) {
	cfg := a.cfg
	switch cfg.Vector.Backend {
	case config.BackendEmbedded:
		eo := cfg.Vector.Options
		eo.Dimension, eo.EmbedderName, eo.Logger = emb.Dimension(), emb.Name(), a.log
		ix, err := embedded.Open(eo)
		if err != nil {
			return nil, fmt.Errorf("open vector index (vector.path = %q): %w", cfg.Vector.Path, err)
		}
		return ix, nil
	case config.BackendQdrant:
		q := cfg.Vector.Qdrant
		qo := q.Options
		qo.APIKey = envOr(opts.Env, q.APIKeyEnv)
		qo.Dimension, qo.EmbedderName = emb.Dimension(), emb.Name()
		qo.SecretFingerprint, qo.PortableVectors = a.secretFP, cfg.Embed.PortableVectors
		qo.OnRefused = func(err error) {
			a.refuse(fmt.Errorf("open qdrant index (vector.qdrant.url = %q): %w", q.Addr, err))
		}
		qo.Logger = a.log
		ix, err := qdrant.Open(ctx, qo)
		if err != nil {
			return nil, fmt.Errorf("open qdrant index (vector.qdrant.url = %q): %w", q.Addr, err)
		}
		if a.owners != nil {
			a.owners.ix.Store(ix)
		}
		return ix, nil
	default:
		return nil, fmt.Errorf("config: vector.backend = %q: must be %q or %q", cfg.Vector.Backend, config.BackendEmbedded, config.BackendQdrant)
	}
}

// sharedOwners is proxy.OwnerStore over the Qdrant index, which opens in
// the background: until it has, ids are this process's alone.
type sharedOwners struct{ ix atomic.Pointer[qdrant.Index] }

var errOwnersNotOpen = errors.New("the qdrant index is not open yet")

func (s *sharedOwners) PutOwner(ctx context.Context, scope, id, upstream string) error {
	ix := s.ix.Load()
	if ix == nil {
		return errOwnersNotOpen
	}
	return ix.PutOwner(ctx, scope, id, upstream)
}

func (s *sharedOwners) Owner(ctx context.Context, scope, id string) (string, bool, error) {
	ix := s.ix.Load()
	if ix == nil {
		return "", false, errOwnersNotOpen
	}
	return ix.Owner(ctx, scope, id)
}

// refusal reports whether err says the shared collection was set up by
// replicas this one cannot share a cache with.
func refusal(err error) bool {
	return errors.Is(err, cache.ErrDimension) || errors.Is(err, cache.ErrEmbedderMismatch) || errors.Is(err, qdrant.ErrSettingMismatch)
}

func envOr(env func(string) string, name string) string {
	if name == "" {
		return ""
	}
	return env(name)
}

// Probe retries: the first after probeFirstRetry, doubling to probeMaxRetry.
const (
	probeFirstRetry = time.Second
	probeMaxRetry   = 30 * time.Second
)

// probeDimension learns the embeddings endpoint's vector length when
// embed.openai.dimensions does not give it: the index cannot be opened
// without it. It calls the endpoint until one call answers (each bounded by
// waitTimeout, retried with backoff), or ctx ends at shutdown.
func (a *App) probeDimension(ctx context.Context) error {
	if a.prober == nil || a.prober.Dimension() > 0 {
		return nil
	}
	wait := probeFirstRetry
	for n := 1; ; n++ {
		pctx, cancel := context.WithTimeout(ctx, waitTimeout)
		_, err := a.prober.Probe(pctx)
		cancel()
		if err == nil {
			if n > 1 {
				a.log.Info("embeddings endpoint answered: opening the semantic tier", "attempts", n)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("learn the embeddings' dimension: %w", ctx.Err())
		}
		if n == 1 {
			a.log.Warn("embeddings endpoint unreachable: the semantic tier waits for it (set embed.openai.dimensions to open it regardless)", "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("learn the embeddings' dimension: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, probeMaxRetry)
	}
}
