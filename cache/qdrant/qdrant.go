// Package qdrant is the cache.Index over a Qdrant collection, the semantic tier shared by every replica.
//
// # Layout
//
// One collection (Options.Collection), one unnamed dense vector per point,
// cosine distance, size Options.Dimension. The embedder name and dimension
// are recorded in the collection's metadata (keys "breakwater_embedder",
// "breakwater_dimension"; Qdrant 1.16+), with the partition secret's
// fingerprint and portable_vectors (see Options.SecretFingerprint). Payload
// indexes: keyword on "partition", "fingerprint" and "kind", integer on
// "expires". Besides entries the collection holds flush records
// (flushes.go) and Responses owners (owners.go), told apart by "kind".
//
// A point's ID is a UUID derived from the entry's exact key (see PointID), so
// every replica finds every other replica's entry by key, and upserting the
// same key replaces the point. Its payload holds key, partition, fingerprint,
// query, model, body (base64), created and expires (unix ms; 0 = never) and
// created_ns/expires_ns (unix ns, for an exact round trip).
//
// # Mismatch
//
// Open refuses a collection whose vectors have another size (cache.ErrDimension)
// or whose metadata names another embedder (cache.ErrEmbedderMismatch). A
// collection without the metadata (made by hand, or by a Qdrant older than
// 1.16, which drops it) is adopted: the metadata is written and a warning
// logged; on a server that drops metadata only the dimension is checked.
//
// # Outages
//
// Open does not fail when Qdrant is unreachable: it returns an Index whose
// methods fail fast with ErrNotReady while a background loop retries the
// collection check with backoff. Open does fail on configuration errors, on a
// mismatch, and on authentication errors. Once the collection is checked, a
// call to an unreachable Qdrant fails within Options.Timeout with the gRPC
// error (codes.Unavailable or DeadlineExceeded); gRPC reconnects by itself,
// and the next call after Qdrant is back succeeds. If the collection
// disappears (a Qdrant restarted without its volume), the next call that sees
// codes.NotFound sends the index back to the not-ready state and the loop
// recreates the collection. The cache layer decides what a failed call means
// (serve from the exact tier and upstream, count, report degraded).
package qdrant

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults for the zero values of Options.
const (
	DefaultAddr       = "localhost:6334"
	DefaultCollection = "breakwater"
	DefaultTimeout    = 2 * time.Second
	DefaultSweepEvery = 5 * time.Minute
)

// Collection metadata keys.
const (
	metaEmbedder  = "breakwater_embedder"
	metaDimension = "breakwater_dimension"
	// metaSecret is cache.SecretFingerprint of the partition secret (never
	// the secret), metaPortable the embed.portable_vectors setting: replicas
	// that disagree on either would share a collection without sharing a
	// cache (partitions differ; vectors differ in their last bits).
	metaSecret   = "breakwater_partition_secret_fingerprint"
	metaPortable = "breakwater_portable_vectors"
)

// ErrSettingMismatch is returned (wrapped) when the collection was set up by
// replicas with another partition secret or portable_vectors setting.
var ErrSettingMismatch = errors.New("qdrant collection shared with replicas configured differently")

// ErrNotReady is returned (wrapped) while the collection has not been checked
// yet, typically because Qdrant was unreachable when the index was opened.
var ErrNotReady = errors.New("qdrant index not ready")

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("qdrant index closed")

// Options configures Open. Addr, Collection, TLS and Timeout are also the
// configuration file's [vector.qdrant] keys (the toml tags; zero:"refused":
// the file's 0 reaches Validate as a negative value, which it refuses).
type Options struct {
	// Addr is Qdrant's gRPC address, "host:port" ([vector.qdrant] url),
	// default "localhost:6334" (DefaultAddr). An "http://" or "https://"
	// prefix is accepted here (the file wants none: set TLS); "https://"
	// turns TLS on.
	Addr string `toml:"url"`
	// Collection is created on first use with cosine distance. Default
	// "breakwater" (DefaultCollection).
	Collection string `toml:"collection"`
	// APIKey is sent as the "api-key" header on every call. Empty sends none.
	APIKey string
	// TLS dials Qdrant over TLS (system roots, TLS 1.3 minimum unless
	// TLSConfig says otherwise). Default false: plaintext.
	TLS bool `toml:"tls"`
	// TLSConfig is used when TLS is on. Nil means the go-client's default.
	TLSConfig *tls.Config
	// Dimension is the embedder's vector size. Required.
	Dimension int
	// EmbedderName identifies the embedder (provider and model) that made the
	// vectors. Required: a collection built by another embedder is refused.
	EmbedderName string
	// SecretFingerprint is cache.SecretFingerprint of the partition secret.
	// When set it is recorded in the collection, and a collection recording
	// another one is refused (ErrSettingMismatch). Empty: not checked.
	SecretFingerprint string
	// PortableVectors is the embedder's embed.portable_vectors setting,
	// recorded and compared like SecretFingerprint when that is set.
	PortableVectors bool
	// OnRefused, when set, is called once (from the background loop) when
	// a collection check that could not run at Open, because Qdrant was
	// unreachable, finds later that the collection cannot be used (a
	// mismatch): the tier is then off until restart, and a fleet's
	// process supervisor should see the replica stop.
	OnRefused func(error)
	// Timeout bounds each Qdrant call. Default 2s (DefaultTimeout).
	Timeout time.Duration `toml:"timeout" zero:"refused"`
	// SweepEvery is how often expired points are deleted. Zero means
	// DefaultSweepEvery; negative disables the sweep.
	SweepEvery time.Duration
	// Logger receives connection and sweep messages. Nil means slog.Default().
	Logger *slog.Logger
	// GRPCDialOptions are appended to the client's dial options (they win
	// over the defaults), e.g. a custom dialer in tests.
	GRPCDialOptions []grpc.DialOption
}

// Index is a cache.Index stored in a Qdrant collection. It is safe for
// concurrent use.
type Index struct {
	opts    Options
	log     *slog.Logger
	client  *qdrant.Client
	points  qdrant.PointsClient
	colls   qdrant.CollectionsClient
	kick    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
	closing sync.Once

	mu     sync.Mutex
	ready  bool
	closed bool
	// setupErr is why the index is not ready: the last failed check, or a
	// mismatch found by the background loop, which is final.
	setupErr error
	fatal    bool
	// id tells this index's flush records from other replicas'.
	id string
	// applyFlush receives other replicas' flushes (WatchFlushes).
	applyFlush func(partition string)
}

var _ cache.Index = (*Index)(nil)

// Open connects to Qdrant, creates or checks the collection and starts the
// expiry sweep. See the package documentation for what happens when Qdrant
// is unreachable.
func Open(ctx context.Context, opts Options) (*Index, error) {
	opts, host, port, err := normalize(opts)
	if err != nil {
		return nil, err
	}
	dial := []grpc.DialOption{
		// gRPC's default reconnect backoff grows to 120s; a cache should notice
		// a restarted Qdrant within seconds (a fleet's replicas are ready again
		// within 5 s of its return: at most 1.2 s of backoff, then the
		// collection check).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: opts.Timeout,
		}),
	}
	client, err := qdrant.NewClient(&qdrant.Config{
		Host:      host,
		Port:      port,
		APIKey:    opts.APIKey,
		UseTLS:    opts.TLS,
		TLSConfig: opts.TLSConfig,
		// The version check blocks up to a minute on an unreachable server.
		SkipCompatibilityCheck: true,
		PoolSize:               1,
		GrpcOptions:            append(dial, opts.GRPCDialOptions...),
	})
	if err != nil {
		return nil, fmt.Errorf("create qdrant client: %w", err)
	}
	ix := &Index{
		opts:   opts,
		log:    opts.Logger.With("component", "qdrant", "collection", opts.Collection),
		client: client,
		points: client.GetPointsClient(),
		colls:  client.GetCollectionsClient(),
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		id:     rand.Text(),
	}
	if err := ix.setup(ctx); err != nil {
		if permanent(err) || ctx.Err() != nil {
			client.Close()
			return nil, err
		}
		ix.log.Warn("qdrant unreachable, semantic tier degraded until it answers", "addr", opts.Addr, "err", err)
		ix.setupErr = err
	} else {
		ix.ready = true
	}
	ix.wg.Add(1)
	go ix.loop()
	return ix, nil
}

func normalize(o Options) (Options, string, int, error) {
	if err := o.Validate(); err != nil {
		return o, "", 0, fmt.Errorf("open qdrant index: %w", err)
	}
	if o.Dimension <= 0 {
		return o, "", 0, fmt.Errorf("open qdrant index: dimension must be positive, got %d", o.Dimension)
	}
	if o.EmbedderName == "" {
		return o, "", 0, errors.New("open qdrant index: embedder name is required")
	}
	if o.Collection == "" {
		o.Collection = DefaultCollection
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = DefaultSweepEvery
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	addr := o.Addr
	switch {
	case strings.HasPrefix(addr, "https://"):
		o.TLS = true
		addr = strings.TrimPrefix(addr, "https://")
	case strings.HasPrefix(addr, "http://"):
		addr = strings.TrimPrefix(addr, "http://")
	}
	addr = strings.TrimSuffix(addr, "/")
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return o, "", 0, fmt.Errorf("parse qdrant address %q (want host:port, gRPC port, usually 6334): %w", o.Addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return o, "", 0, fmt.Errorf("parse qdrant address %q: bad port %q", o.Addr, p)
	}
	return o, host, port, nil
}

// permanent reports whether a setup error will not go away by retrying.
func permanent(err error) bool {
	if errors.Is(err, cache.ErrDimension) || errors.Is(err, cache.ErrEmbedderMismatch) || errors.Is(err, errIncompatible) || errors.Is(err, ErrSettingMismatch) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.FailedPrecondition, codes.Unimplemented:
		return true
	}
	return false
}

// loop retries the collection check while the index is not ready and runs
// the expiry sweep.
func (ix *Index) loop() {
	defer ix.wg.Done()
	var sweep <-chan time.Time
	if ix.opts.SweepEvery > 0 {
		t := time.NewTicker(ix.opts.SweepEvery)
		defer t.Stop()
		sweep = t.C
	}
	const minWait, maxWait = 250 * time.Millisecond, 10 * time.Second
	wait := minWait
	retry := time.NewTimer(wait)
	defer retry.Stop()
	for {
		select {
		case <-ix.done:
			return
		case <-ix.kick:
			wait = minWait
			retry.Reset(0)
		case <-retry.C:
			if ix.isReady() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*ix.opts.Timeout)
			err := ix.setup(ctx)
			cancel()
			ix.mu.Lock()
			switch {
			case err == nil:
				ix.ready, ix.setupErr = true, nil
				ix.log.Info("qdrant collection ready")
			case permanent(err):
				ix.setupErr, ix.fatal = err, true
				ix.log.Error("qdrant collection refused; semantic tier disabled until restart", "err", err)
				if ix.opts.OnRefused != nil {
					go ix.opts.OnRefused(err)
				}
			default:
				ix.setupErr = err
				ix.log.Debug("qdrant still unreachable", "err", err, "retry_in", wait)
				retry.Reset(wait)
				wait = min(2*wait, maxWait)
			}
			ix.mu.Unlock()
		case <-sweep:
			if !ix.isReady() {
				continue
			}
			if err := ix.Sweep(context.Background()); err != nil {
				ix.log.Warn("sweep expired points", "err", err)
			}
		}
	}
}

func (ix *Index) isReady() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.ready
}

// usable returns nil when calls may go to Qdrant, else why not.
func (ix *Index) usable() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	switch {
	case ix.closed:
		return ErrClosed
	case ix.ready:
		return nil
	case ix.fatal:
		return ix.setupErr
	case ix.setupErr != nil:
		return fmt.Errorf("%w: %w", ErrNotReady, ix.setupErr)
	}
	return ErrNotReady
}

// observe inspects the error of a data call: a missing collection sends the
// index back to setup, so a Qdrant that lost its data gets the collection
// recreated.
func (ix *Index) observe(err error) {
	if status.Code(err) != codes.NotFound {
		return
	}
	ix.mu.Lock()
	wasReady := ix.ready
	ix.ready, ix.setupErr = false, err
	ix.mu.Unlock()
	if wasReady {
		ix.log.Warn("qdrant collection missing, recreating", "err", err)
		select {
		case ix.kick <- struct{}{}:
		default:
		}
	}
}

// Ping reports whether the index can serve: nil when the collection is
// checked and Qdrant answers a health check within Options.Timeout. Meant for
// readiness reporting.
func (ix *Index) Ping(ctx context.Context) error {
	if err := ix.usable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ix.opts.Timeout)
	defer cancel()
	if _, err := ix.client.GetQdrantClient().HealthCheck(ctx, &qdrant.HealthCheckRequest{}); err != nil {
		return fmt.Errorf("ping qdrant: %w", err)
	}
	return nil
}

// Close stops the sweep and closes the connection. It is safe to call twice.
// Upserts are synchronous (wait=true), so there is nothing to flush.
func (ix *Index) Close() error {
	var err error
	ix.closing.Do(func() {
		ix.mu.Lock()
		ix.closed = true
		ix.mu.Unlock()
		close(ix.done)
		ix.wg.Wait()
		err = ix.client.Close()
	})
	return err
}

func (ix *Index) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ix.opts.Timeout)
}
