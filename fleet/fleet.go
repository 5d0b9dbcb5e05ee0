// Package fleet is what replicas share: the budgets of tenants and classes
// ([[budgets]]), kept atomically in Redis when [fleet] redis_url is set and
// per replica otherwise, and the live replicas' count by heartbeat. It
// plugs into the proxy as a wrapper around the upstream caller (Wrap), so
// only a miss that goes upstream draws on a budget: an answer from the
// cache, or a follower of a coalesced call, uses none.
//
// Redis is never on a request's critical path for longer than
// Options.Timeout: a call that takes longer, or fails, leaves its request
// to this replica's share of the budget (its limit ÷ live replicas, as last
// counted), and a few in a row mark Redis down, so that the next requests
// do not try it; the heartbeat probes Redis every Options.Heartbeat and
// brings sharing back as soon as it answers.
package fleet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/lib/setting"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Defaults of Options.
const (
	// DefaultTimeout bounds every Redis call: a request waits at most this
	// long for its budget check before it is decided locally.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultHeartbeat is how often a replica renews its beat (and probes
	// Redis while it is down).
	DefaultHeartbeat = 500 * time.Millisecond
	// DefaultPrefix starts every key this package writes in Redis.
	DefaultPrefix = "breakwater"
)

// replicaTTL is how many beats a replica's beat outlives: one missed beat
// does not make the fleet look smaller.
const replicaTTL = 6

// StoreOptions are the shared store's ([fleet] in the configuration file:
// the toml tags are its keys, the comments what an operator reads).
type StoreOptions struct {
	// RedisURL is the shared store of the fleet's budgets and capacity
	// estimate (redis://[user:password@]host:port/db, rediss:// for TLS,
	// unix:// for a socket). Empty (default): nothing is shared, budgets
	// apply per replica.
	RedisURL string `toml:"redis_url"`
	// Timeout bounds every Redis call; past it a request is decided by
	// this replica's share. Default 50ms (DefaultTimeout). Must be > 0.
	Timeout time.Duration `toml:"redis_timeout" zero:"refused"`
	// Prefix starts every key written in Redis, so that fleets can share
	// one Redis. Default "breakwater" (DefaultPrefix; empty here means it).
	Prefix string `toml:"redis_prefix"`
}

// DefaultStoreOptions are StoreOptions with every field at its Default…,
// as a configuration file without [fleet] has them.
func DefaultStoreOptions() StoreOptions {
	return StoreOptions{Timeout: DefaultTimeout, Prefix: DefaultPrefix}
}

// Validate reports every problem of o, each a *setting.Error naming the
// [fleet] key. It judges o as New uses it, after New's defaults (a zero
// Timeout is DefaultTimeout, an empty Prefix DefaultPrefix): a file's
// section starts at DefaultStoreOptions, so an empty prefix there is one
// the file wrote, and refused.
func (o StoreOptions) Validate() error {
	var es setting.Errors
	if u := o.RedisURL; u != "" {
		// go-redis's ParseURL takes these schemes (redis.ParseURL); a
		// host is required but for a socket.
		if p, err := url.Parse(u); err != nil || (p.Scheme != "redis" && p.Scheme != "rediss" && p.Scheme != "unix") || (p.Host == "" && p.Scheme != "unix") {
			es.Add("fleet.redis_url", u, `must be a redis:// or rediss:// URL, e.g. "redis://redis:6379/0"`)
		}
	}
	setting.Negative(&es, "fleet.redis_timeout", o.Timeout, "must be > 0")
	if o.Prefix == "" {
		es.Add("fleet.redis_prefix", o.Prefix, "must not be empty")
	}
	return es.Err()
}

// Options configure a Fleet. Zero values are documented per field.
type Options struct {
	// The shared store: RedisURL, Timeout, Prefix.
	StoreOptions
	// Heartbeat is the beat's period. Zero: DefaultHeartbeat.
	Heartbeat time.Duration
	// Budgets are the [[budgets]]. None: Wrap returns the caller unchanged.
	Budgets []Budget
	// Logger receives Redis going down and coming back. Nil: discarded.
	Logger *slog.Logger
}

// Fleet holds the budgets' state and the link to Redis. Safe for
// concurrent use; Close stops its heartbeat.
type Fleet struct {
	opts    Options
	ro      *redis.Options               // nil: no Redis
	rdb     atomic.Pointer[redis.Client] // replaced while Redis is down (heartbeat)
	id      string
	local   localBuckets
	budgets []Budget

	up     atomic.Bool  // Redis answers (see fault)
	fails  atomic.Int32 // calls failed in a row
	live   atomic.Int64 // live replicas at the last beat (≥ 1)
	loaded bool         // the scripts are loaded (the heartbeat's goroutine only)

	snapshot atomic.Pointer[func() []upstream.ModelStats] // Attach
	capacity atomic.Pointer[capacityState]                // the fleet's estimate at the last beat
	gates    gates                                        // the capacity gate's targets (gate.go)
	subc     *redis.Client                                // the gate's wakes (subscribe); nil without Redis
	sub      *redis.PubSub

	stats counters

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New validates opts and, with a RedisURL, starts the heartbeat. It does
// not wait for Redis: a replica starts with its local share and joins the
// fleet's budgets at its first successful beat.
func New(opts Options) (*Fleet, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := errors.Join(opts.StoreOptions.Validate(), ValidateBudgets(opts.Budgets)); err != nil {
		return nil, fmt.Errorf("new fleet: %w", err)
	}
	f := &Fleet{opts: opts, id: rand.Text(), stop: make(chan struct{}), done: make(chan struct{})}
	f.live.Store(1)
	for i, b := range opts.Budgets {
		if b.Name == "" {
			b.Name = fmt.Sprintf("budget%d", i+1)
		}
		f.budgets = append(f.budgets, b)
	}
	f.stats.init(f.budgets)
	if opts.RedisURL == "" {
		close(f.done)
		return f, nil
	}
	ro, err := redis.ParseURL(opts.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("fleet redis_url: %w", err)
	}
	// Every wait bounded by the timeout, and no retry: a request decides
	// locally rather than wait for a second try.
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout, ro.PoolTimeout = opts.Timeout, opts.Timeout, opts.Timeout, opts.Timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1
	ro.DialerRetries = 1
	// Connections ready before the first request needs one.
	ro.MinIdleConns = 2
	// CLIENT SETINFO is unknown before Redis 7.2 (Debian 12 ships 7.0).
	ro.DisableIdentity = true
	quietRedis.Do(func() { redis.SetLogger(discardLogger{}) })
	f.ro = ro
	f.rdb.Store(redis.NewClient(ro))
	f.subscribe(ro)
	// The first beat before New returns (bounded by the timeout): a replica
	// counts the fleet, and knows its capacity estimate, before its first
	// request.
	f.beatOnce(f.beatTTL())
	go f.heartbeat()
	return f, nil
}

// Shared reports whether budgets are kept in Redis (configured, whatever
// its state now).
func (f *Fleet) Shared() bool { return f.ro != nil }

// Close stops the heartbeat, removes this replica's beat and closes the
// connections.
func (f *Fleet) Close() error {
	f.once.Do(func() {
		close(f.stop)
		<-f.done
		if f.sub != nil {
			_ = f.sub.Close()
			_ = f.subc.Close()
		}
		if rdb := f.rdb.Load(); rdb != nil {
			ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
			rdb.ZRem(ctx, f.key("replicas"), f.id)
			cancel()
			_ = rdb.Close()
		}
	})
	return nil
}

func (f *Fleet) key(parts ...string) string {
	k := f.opts.Prefix
	for _, p := range parts {
		k += ":" + p
	}
	return k
}

// heartbeat renews this replica's beat, counts the live ones and tells
// whether Redis answers, every Options.Heartbeat.
func (f *Fleet) heartbeat() {
	defer close(f.done)
	t := time.NewTicker(f.opts.Heartbeat)
	defer t.Stop()
	ttl := f.beatTTL()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.beatOnce(ttl)
	}
}

func (f *Fleet) beatTTL() int64 { return (time.Duration(replicaTTL) * f.opts.Heartbeat).Milliseconds() }

// beatOnce is one beat: renew, count, share the capacity estimate; or, on
// failure, mark Redis down.
func (f *Fleet) beatOnce(ttl int64) {
	n, err := f.beat(ttl)
	if err != nil && !f.up.Load() {
		// Once more at once: after a restart of Redis the pool's
		// first connection is a dead one, and the next is dialled.
		n, err = f.beat(ttl)
	}
	if err == nil {
		if n < 1 {
			n = 1
		}
		f.live.Store(n)
		f.fails.Store(0)
		if !f.up.Swap(true) {
			f.opts.Logger.Info("fleet: redis answers; budgets shared", "replicas", n)
		}
		if !f.loaded {
			// Loaded once, so that no request pays EVALSHA's NOSCRIPT
			// and a second round trip.
			ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
			rdb := f.rdb.Load()
			f.loaded = true
			for _, s := range []*redis.Script{reserveScript, adjustScript, acquireScript, releaseScript} {
				f.loaded = f.loaded && s.Load(ctx, rdb).Err() == nil
			}
			cancel()
		}
		f.shareCapacity(n)
	} else {
		f.loaded = false // Redis may have restarted without its scripts
		f.fault(err, true)
		// A fresh client for the next beat: go-redis's pool, after as
		// many failed dials as its size, dials again only once a
		// second in the background, which would hold sharing back
		// that long after Redis returns.
		if old := f.rdb.Swap(redis.NewClient(f.ro)); old != nil {
			_ = old.Close()
		}
	}
}

// faultsDown is how many request calls in a row must fail before Redis is
// marked down: one call past the bound (a connection dialled on a busy
// machine, a script loaded) decides only its own request locally.
const faultsDown = 3

// beat renews this replica's beat and returns the live replicas.
func (f *Fleet) beat(ttl int64) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	defer cancel()
	return heartbeatScript.Run(ctx, f.rdb.Load(), []string{f.key("replicas")}, f.id, ttl).Int64()
}

// fault counts a failed call; a failed heartbeat, or faultsDown failed
// calls in a row, mark Redis down: requests are then decided locally, at
// once, until the next beat succeeds.
func (f *Fleet) fault(err error, beat bool) {
	f.stats.faults.Add(1)
	if n := f.fails.Add(1); !beat && n < faultsDown {
		return
	}
	if f.up.Swap(false) {
		f.opts.Logger.Warn("fleet: redis unreachable; budgets fall back to this replica's share", "err", err.Error(), "replicas", f.live.Load())
	}
}

// reserve takes takes from the shared buckets when Redis is up and answers
// within the timeout, else from this replica's share; remote says which.
func (f *Fleet) reserve(ctx context.Context, takes []take) (v verdict, remote bool) {
	if f.ro != nil && f.up.Load() {
		keys, args := scriptArgs(takes)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opts.Timeout)
		res, err := reserveScript.Run(ctx, f.rdb.Load(), keys, args...).Int64Slice()
		cancel()
		if err == nil && len(res) >= 1 {
			f.fails.Store(0)
			v := parseVerdict(res, len(takes))
			if v.Refused < 0 {
				// The local buckets follow what this replica takes while
				// Redis decides, so that a fallback starts from its use
				// of its share, not from a full bucket: a flapping Redis
				// would otherwise admit a share more at every flap.
				f.local.adjust(time.Now(), takes, f.share())
			}
			return v, true
		}
		if err == nil {
			err = errors.New("unexpected reply")
		}
		f.fault(err, false)
	}
	if f.ro != nil {
		f.stats.fallbacks.Add(1)
	}
	return f.local.reserve(time.Now(), takes, f.share()), false
}

// adjust moves the buckets a reservation drew on, where it drew on them.
// A shared reservation that cannot be adjusted (Redis went away) is
// counted and left as reserved: its estimate stands.
func (f *Fleet) adjust(ctx context.Context, takes []take, remote bool) {
	if len(takes) == 0 {
		return
	}
	if !remote {
		f.local.adjust(time.Now(), takes, f.share())
		return
	}
	if !f.up.Load() {
		f.stats.lostAdjustments.Add(1)
		return
	}
	keys, args := scriptArgs(takes)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.opts.Timeout)
	err := adjustScript.Run(ctx, f.rdb.Load(), keys, args...).Err()
	cancel()
	if err != nil {
		f.stats.lostAdjustments.Add(1)
		f.fault(err, false)
		return
	}
	f.fails.Store(0)
	f.local.adjust(time.Now(), takes, f.share())
}

// share is what this replica's local buckets divide limits by: 1 without
// Redis (budgets per replica), the live replicas last counted with it.
func (f *Fleet) share() float64 {
	if f.ro == nil {
		return 1
	}
	return float64(max(f.live.Load(), 1))
}

func scriptArgs(takes []take) ([]string, []any) {
	keys := make([]string, len(takes))
	args := make([]any, 0, 3*len(takes))
	for i, tk := range takes {
		keys[i] = tk.key
		args = append(args, tk.period, tk.limit, tk.cost)
	}
	return keys, args
}

func parseVerdict(res []int64, n int) verdict {
	v := verdict{Refused: -1, Remaining: make([]int64, n)}
	if res[0] == 1 {
		copy(v.Remaining, res[1:])
		return v
	}
	if len(res) < 4 || res[1] < 1 || int(res[1]) > n {
		return verdict{Refused: -1, Remaining: v.Remaining}
	}
	v.Refused = int(res[1]) - 1
	v.RetryAfter = time.Duration(res[2]) * time.Millisecond
	v.Remaining[v.Refused] = res[3]
	return v
}

// quietRedis silences go-redis's own log (process-wide: it has one
// logger), which prints each failed dial to stderr: an outage is logged
// once by fault, and counted.
var quietRedis sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
