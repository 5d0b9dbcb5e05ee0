package upstream

import (
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// Bounds on state created from what clients send: beyond maxModelTargets,
// models that no route names share the default upstream's common target.
const (
	maxModelTargets = 64
	maxModelName    = 128
)

// laneKey is the lane of a request to up (lane.Key): the client's key
// hashed when it is forwarded, "" when the sidecar holds the key.
func laneKey(h http.Header, up Upstream) string { return lane.Key(h, up.APIKey != "") }

// laneCounts is a target's sums over its lanes, and its sheds by reason.
type laneCounts struct {
	limitMilli atomic.Int64 // sum of the lanes' limits × 1000
	paceMilli  atomic.Int64 // sum of the lanes' paces below one slot × 1000
	sheds      [len(lane.ShedReasons)]atomic.Uint64
}

func (t *target) initLanes() {
	t.lanes = lane.NewSet(laneTarget{t}, t.up.cfg.MaxConcurrency, t.up.cfg.MaxQueue)
	if seed := t.c.seed; seed != nil {
		t.lanes.Seed(func() (float64, time.Duration) { return seed(t.name) })
	}
}

// laneFor returns the lane of key, creating it when needed.
func (t *target) laneFor(key string) *lane.Lane { return t.lanes.For(key) }

// laneTarget is what a target's lanes report to (lane.Target).
type laneTarget struct{ t *target }

func (lt laneTarget) Name() string              { return lt.t.name }
func (lt laneTarget) LimitMoved(d float64)      { lt.t.limitMoved(d) }
func (lt laneTarget) PaceMoved(d float64)       { lt.t.paceMoved(d) }
func (lt laneTarget) Queued(d int64)            { lt.t.stats.queued.Add(d) }
func (lt laneTarget) QueueWait(d time.Duration) { lt.t.c.metrics.QueueWait(lt.t.name, d) }
func (lt laneTarget) Abandoned()                { lt.t.abandoned() }
func (lt laneTarget) Rand() float64             { return lt.t.c.rand() }
func (lt laneTarget) RetrySent()                { lt.retry(&lt.t.stats.retries, "sent") }
func (lt laneTarget) BudgetWaited()             { lt.retry(&lt.t.stats.budgetWaits, "waited") }
func (lt laneTarget) LoneRetry()                { lt.retry(&lt.t.stats.loneRetries, "lone") }
func (lt laneTarget) retry(n *atomic.Uint64, result string) {
	n.Add(1)
	lt.t.c.metrics.RetryBudget(lt.t.name, result)
}

func (t *target) limitMoved(d float64) {
	v := t.counts.limitMilli.Add(int64(math.Round(d * 1000)))
	t.c.metrics.Limit(t.name, float64(v)/1000)
}

func (t *target) paceMoved(d float64) {
	v := t.counts.paceMilli.Add(int64(math.Round(d * 1000)))
	t.c.metrics.PaceRate(t.name, float64(v)/1000)
}

// abandoned counts an attempt whose client had gone before the answer.
func (t *target) abandoned() {
	t.stats.abandoned.Add(1)
	t.c.metrics.Abandoned(t.name)
}

func (t *target) shed(reason string) {
	for i, r := range lane.ShedReasons {
		if r == reason {
			t.counts.sheds[i].Add(1)
		}
	}
	t.stats.shed.Add(1)
	t.c.metrics.Shed(t.name, reason)
}

// laneSummary aggregates a target's lanes for stats: the summed limit and
// service rate, the longest queue wait, whether any lane is paced.
type laneSummary struct {
	limit, rate float64
	pace        float64
	wait        time.Duration
	service     time.Duration
	queued      int
	paced       bool
	count       int
	// tokenLimit and tokensLeft sum the lanes' token budgets by limit;
	// nil when none learnt one.
	tokenLimit, tokensLeft map[string]float64
}

func (t *target) summary(now time.Time) laneSummary {
	var s laneSummary
	var services time.Duration
	t.lanes.Each(func(l *lane.Lane) {
		ls := l.Snapshot(now)
		if !ls.Used {
			return // never admitted a request: its limit is only the starting point
		}
		s.count++
		s.limit += ls.Limit
		s.rate += ls.Rate
		s.pace += ls.Pace
		s.wait = max(s.wait, ls.Wait)
		s.queued += ls.Queued
		s.paced = s.paced || ls.Paced
		if ls.Service > 0 {
			services = max(services, ls.Service)
		}
		for k, v := range ls.Tokens.Limit {
			if s.tokenLimit == nil {
				s.tokenLimit, s.tokensLeft = make(map[string]float64), make(map[string]float64)
			}
			s.tokenLimit[k] += v
			s.tokensLeft[k] += ls.Tokens.Left[k]
		}
	})
	s.service = services
	return s
}

// upstream is one API with its pools.
type upstream struct {
	cfg   Upstream
	pools map[string]*lane.Pool
}

func newUpstream(u Upstream, m *Metrics) *upstream {
	u = u.WithDefaults()
	up := &upstream{cfg: u, pools: make(map[string]*lane.Pool, len(u.Pools)+1)}
	up.pools[defaultPool] = newPool(u.Name, defaultPool, u.MaxConcurrency, u.MaxQueue, m)
	for name, l := range u.Pools {
		up.pools[name] = newPool(u.Name, name, l.MaxConcurrency, l.MaxQueue, m)
	}
	return up
}

// pool returns the class's pool; unknown classes share the default pool so that
// clients cannot mint metric labels.
func (u *upstream) pool(class string) *lane.Pool {
	if p, ok := u.pools[class]; ok {
		return p
	}
	return u.pools[defaultPool]
}

// newPool makes an upstream's pool with its gauges.
func newPool(upstream, name string, max, maxQueue int, m *Metrics) *lane.Pool {
	if m == nil {
		return lane.NewPool(upstream, name, max, maxQueue, nil, nil)
	}
	// The gauge is looked up once: WithLabelValues hashes the labels on
	// every call, and every attempt moves it twice.
	return lane.NewPool(upstream, name, max, maxQueue, m.Inflight.WithLabelValues(upstream),
		func(n int) { m.QueuedSet(upstream, name, n) })
}

// modelTargets makes, on first use, a target per model for the default
// upstream, so a model that always fails opens its own breaker and not that
// of every model no route names.
type modelTargets struct {
	mu  sync.Mutex
	by  map[modelKey]*member
	all []*member // creation order, for Snapshot
}

// modelKey names a target made for a model no route lists ("" for the
// upstream's common one): a struct, so that a lookup builds no string.
type modelKey struct{ upstream, model string }

// defaultMember returns the member for a model no route lists: its own
// target on upstreamName (Request.Upstream), or on the default upstream when
// that names none it knows. Past maxModelTargets, or for a model name too
// long to keep, the upstream's common target.
func (c *Caller) defaultMember(upstreamName, model string) *member {
	common := c.def.flat[0]
	up := common.t.up
	if u, ok := c.ups[upstreamName]; ok && u != up {
		up = u
	}
	mt := &c.models
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if up != common.t.up {
		common = c.memberLocked(Target{Upstream: up.cfg.Name}, up)
	}
	if model == "" || len(model) > maxModelName || len(mt.all) >= maxModelTargets && mt.by[modelKey{up.cfg.Name, model}] == nil {
		return common
	}
	return c.memberLocked(Target{Upstream: up.cfg.Name, Model: model}, up)
}

// memberLocked returns the member made for tc, making it on first use.
// The target sends the client's model unchanged (target.model is ""): tc's
// Model only names it. c.models.mu is held.
func (c *Caller) memberLocked(tc Target, up *upstream) *member {
	mt := &c.models
	k := modelKey{tc.Upstream, tc.Model}
	if m, ok := mt.by[k]; ok {
		return m
	}
	t := &target{name: targetName(tc), up: up, breaker: breaker.New(c.bopts), factor: 1, cfgWeight: 1, c: c}
	t.initLanes()
	c.metrics.Health(t.name, int(StateClosed), 1)
	m := &member{t: t, weight: 1}
	if mt.by == nil {
		mt.by = make(map[modelKey]*member)
	}
	mt.by[k] = m
	mt.all = append(mt.all, m)
	return m
}

func (c *Caller) modelMembers() []*member {
	c.models.mu.Lock()
	defer c.models.mu.Unlock()
	return append([]*member(nil), c.models.all...)
}
