package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on state created from what clients send.
const (
	// maxLanes bounds the per-key lanes of one target; when every lane is busy
	// a new key shares the target's common lane.
	maxLanes = 1024
	// maxModelTargets bounds the targets made for models that no route names;
	// beyond it such models share the default upstream's common target.
	maxModelTargets = 64
	maxModelName    = 128
)

// keyHeaders carry a client's API key: OpenAI's Authorization, Anthropic's
// x-api-key, Gemini's x-goog-api-key.
var keyHeaders = [...]string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"}

// laneKey is the lane of a request to up: a hash of the client's key when the
// key is forwarded (upstream limits are per key), "" when the sidecar holds
// the key. The key itself is never stored or logged.
func laneKey(h http.Header, up Upstream) string {
	if up.APIKey != "" {
		return ""
	}
	for _, name := range keyHeaders {
		if v := h.Get(name); v != "" {
			var buf [256]byte // keys fit; a longer one spills to the heap
			sum := sha256.Sum256(append(append(append(buf[:0], name...), 0), v...))
			var out [16]byte
			hex.Encode(out[:], sum[:8])
			return string(out[:])
		}
	}
	return ""
}

// lanes is a target's admission state: one common lane, plus one per
// forwarded key.
type lanes struct {
	shared *lane

	mu  sync.Mutex
	per map[string]*lane

	limitMilli atomic.Int64 // sum of the lanes' limits × 1000
	paceMilli  atomic.Int64 // sum of the lanes' paces below one slot × 1000
	sheds      [len(shedReasons)]atomic.Uint64
}

func (t *target) initLanes() {
	t.lanes.per = make(map[string]*lane)
	t.lanes.shared = t.newLane("")
}

func (t *target) newLane(key string) *lane {
	return newLane(t, key, t.up.cfg.MaxConcurrency, t.up.cfg.MaxQueue)
}

// laneFor returns the lane of key, creating it when needed; an idle lane is
// evicted to make room when the target has maxLanes.
func (t *target) laneFor(key string) *lane {
	if key == "" {
		return t.lanes.shared
	}
	ls := &t.lanes
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l, ok := ls.per[key]; ok {
		return l
	}
	if len(ls.per) >= maxLanes {
		now := time.Now()
		for k, l := range ls.per {
			if l.idle(now) {
				l.mu.Lock()
				limit, pace, used := l.lim.limit, l.lim.belowOne(), !l.used.IsZero()
				l.mu.Unlock()
				if used {
					t.limitMoved(-limit)
				}
				if pace != 0 {
					t.paceMoved(-pace)
				}
				delete(ls.per, k)
				break
			}
		}
		if len(ls.per) >= maxLanes {
			return ls.shared
		}
	}
	l := t.newLane(key)
	ls.per[key] = l
	return l
}

// each calls f on every lane of t.
func (t *target) eachLane(f func(*lane)) {
	f(t.lanes.shared)
	t.lanes.mu.Lock()
	all := make([]*lane, 0, len(t.lanes.per))
	for _, l := range t.lanes.per {
		all = append(all, l)
	}
	t.lanes.mu.Unlock()
	for _, l := range all {
		f(l)
	}
}

func (t *target) limitMoved(d float64) {
	v := t.lanes.limitMilli.Add(int64(math.Round(d * 1000)))
	t.c.metrics.limit(t.name, float64(v)/1000)
}

func (t *target) paceMoved(d float64) {
	v := t.lanes.paceMilli.Add(int64(math.Round(d * 1000)))
	t.c.metrics.paceRate(t.name, float64(v)/1000)
}

// abandoned counts an attempt whose client had gone before the answer.
func (t *target) abandoned() {
	t.stats.abandoned.Add(1)
	t.c.metrics.abandoned(t.name)
}

func (t *target) shed(reason string) {
	for i, r := range shedReasons {
		if r == reason {
			t.lanes.sheds[i].Add(1)
		}
	}
	t.stats.shed.Add(1)
	t.c.metrics.shed(t.name, reason)
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
}

func (t *target) summary(now time.Time) laneSummary {
	var s laneSummary
	var services time.Duration
	t.eachLane(func(l *lane) {
		ls := l.snapshot(now)
		if !ls.used {
			return // never admitted a request: its limit is only the starting point
		}
		s.count++
		s.limit += ls.limit
		s.rate += ls.rate
		s.pace += ls.pace
		s.wait = max(s.wait, ls.wait)
		s.queued += ls.queued
		s.paced = s.paced || ls.paced
		if ls.service > 0 {
			services = max(services, ls.service)
		}
	})
	s.service = services
	return s
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
	t := &target{name: targetName(tc), up: up, breaker: newBreaker(c.bopts), factor: 1, cfgWeight: 1, c: c}
	t.initLanes()
	c.metrics.health(t.name, StateClosed, 1)
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
