package fleet

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// The capacity gate (issue 38): with Redis, the fleet admits attempts to a
// model as one sidecar's lane would, through one concurrency limit per lane
// (a target, and a forwarded key's hash) kept in Redis and a lease per
// attempt in flight.
//
// Each replica's lane finds its share of a model alone, so N lanes in
// front of one model collide: each probes, each is refused, and every
// refusal with Retry-After: 1 holds a lane for a second (six replicas
// sharing nothing delivered 170 of the 188 answers going straight gets to
// clients that give up after 3 s; two of six starved at one answer each).
// The gate is upstream.Options.Gate: after a replica's lane admitted an
// attempt and before it is sent, the attempt takes a lease from the
// target's limit in Redis, and gives it back with its outcome.
//
// The limit is learnt in Redis as a lone lane learns its own
// (lane/adaptive.go): slow start (+1 per answer) until the first
// refusal; a refusal of an attempt sent after the last cut (TCP's once per
// round trip, RFC 5681 §3.1) sets the limit to what the model took, the
// leases held less the refused one, when that is two or more (a count, not
// an estimate: it grows straight back to it, and probes beyond only after
// gateProbeWait, twice as long after each refused probe), else halves it;
// an answer while at least half the limit is held adds 1 ÷ limit (one slot
// per round trip: AIMD). A refusal of an attempt sent before the last cut
// was counted as taken by that cut, so it takes one off the count: twelve
// replicas' slow start overshoots by several attempts at once.
//
// Fairness: a free slot goes to the waiting replica that holds the fewest
// leases, and among those to the one longest since its last lease (each
// replica reports its waiting requests with every call, kept gateWaitTTL),
// so a replica that just released a slot does not take it back while
// another waits: lanes sharing nothing starved two replicas of six at one
// answer each. Max-min, not in proportion to the requests waiting: a
// replica whose lane admitted more would have more waiting and take more
// (90 53 75 answers at three replicas). A release publishes whose turn the
// free slot is, and that replica's poller asks at once (subscribe).
//
// A gated attempt's refusal teaches the gate, not the lane (the upstream
// caller returns the lane's slot without a cut): cut as well, the refused
// replica's lane held back what the gate would grant it for the rest of a
// peak.
//
// Meeting no refusal, a gated lane would grow with every answer (30 to 56
// slots per replica in front of a model that takes 4 to 8), and send at
// that limit the moment the gate goes. So every call also answers this
// replica's max-min share of the limit (what is left of it once every
// other replica that holds and waits for less than an equal part has
// that), and the caller caps the lane at it, in whole slots (Share): when
// Redis goes, the replicas' lanes sum to the gate's limit plus less than
// one slot each.
//
// A lease expires after twice the longest answer lately plus gateLeaseSlack
// (clamped), so a crashed replica's leases come back; every attempt
// releases its own on every path, an abandoned one when its lane would
// (the model is still busy with it: lane.Abandon).
//
// The lane stays the fallback: without Redis there is no gate; while it is
// down, or when a call fails or runs past Options.Timeout, the attempt goes
// on without a lease, from the lane's share, and is counted
// (gate_bypassed). No attempt waits for
// Redis longer than that bound; it waits for the gate, as in a lane's
// queue, while the fleet's limit is full, and no longer than an answer can
// still arrive before its deadline.

// Gate tunables.
const (
	// gateColdLimit is the limit a target starts with when the fleet has
	// no estimate of it: slow start from it, as a lane's limit once its
	// first answer came (lane.DefaultInitialLimit).
	gateColdLimit = lane.ColdSlots
	// gateProbeWait is how long the limit stays at a counted level before
	// probing beyond it; each refused probe doubles it, up to
	// gateMaxProbeWait (lane/adaptive.go's countedProbeWait and
	// maxProbeWait).
	gateProbeWait    = 8 * time.Second
	gateMaxProbeWait = 32 * time.Second
	// gateLeaseSlack is added to twice the longest answer for a lease's
	// TTL; gateLeaseMax bounds it.
	gateLeaseSlack = 5 * time.Second
	gateLeaseMax   = 10 * time.Minute
	// gateIdle is how long a target's state (its learnt limit) lives in
	// Redis after its last use.
	gateIdle = 10 * time.Minute
	// gateWaitTTL is how long a replica's report of its waiting requests
	// counts: a few polls. A replica whose requests left stops being
	// deferred to within it.
	gateWaitTTL = 100 * time.Millisecond
	// gatePoll is how soon a waiting replica asks again when no release
	// woke it first (see releaseScript): a wake lost while the
	// subscription reconnects costs a free slot at most this long.
	gatePoll = 25 * time.Millisecond
	// maxGateTargets bounds the targets the gate keeps state for; past it
	// a target goes without the gate.
	maxGateTargets = 1024
	// gateLIFOAfter is how long a replica's gate queue must have been
	// non-empty before it serves the newest first (lane.lifoAfterDefault:
	// under sustained queueing the oldest are the ones whose clients are
	// about to give up).
	gateLIFOAfter = time.Second
)

// acquireScript: KEYS[1] is a lane's state (hash: limit, ss (slow start),
// cut (when last cut), level (the counted level), counted, reached (when
// the limit reached the level), probe (the wait before probing beyond it),
// svchi (the longest answer lately, for the leases' TTL); times in Redis
// ms), KEYS[2]
// its leases (sorted set: lease id "replica:seq" → expiry ms), KEYS[3] the
// leases each replica holds (hash), KEYS[4] the requests each replica has
// waiting (hash: "count expiry"). ARGV: this replica, the lease id, its
// waiting requests (this one included), the start limit (0: slow start
// from ARGV[11]), the state's idle TTL, the waiting report's TTL, the
// lease's TTL bounds (slack, max), the probe wait and the poll delay (ms),
// the cold limit. It returns {1, now, share} with the lease granted, else
// {0, poll delay, share}; share is this replica's share of the limit × 1000
// (see Share).
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, want = ARGV[1], tonumber(ARGV[3])
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, m in ipairs(old) do
  local r = string.match(m, '^(.*):[^:]*$')
  if r and redis.call('HINCRBY', KEYS[3], r, -1) <= 0 then redis.call('HDEL', KEYS[3], r) end
end
if #old > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local st = redis.call('HMGET', KEYS[1], 'limit', 'svchi')
local limit = tonumber(st[1])
if not limit then
  limit = tonumber(ARGV[4])
  if limit > 0 then
    redis.call('HSET', KEYS[1], 'limit', limit, 'ss', 0, 'level', limit, 'counted', 1, 'probe', ARGV[9])
  else
    limit = tonumber(ARGV[11])
    redis.call('HSET', KEYS[1], 'limit', limit, 'ss', 1)
  end
end
local held = redis.call('ZCARD', KEYS[2])
local mine = tonumber(redis.call('HGET', KEYS[3], me) or '0')
local since = now
local first = true
local w = redis.call('HGETALL', KEYS[4])
local others = {}
for i = 1, #w, 2 do
  local r, n, exp, last = w[i], string.match(w[i+1], '^(%S+) (%S+) (%S+)$')
  n, exp, last = tonumber(n), tonumber(exp), tonumber(last)
  if r == me then
    since = last
  elseif exp <= now then
    redis.call('HDEL', KEYS[4], r)
  elseif n > 0 then
    others[#others + 1] = {r, last, n}
  end
end
-- This replica's share of the limit, max-min as turns go: what is left of
-- it once every other replica that holds and waits for less than an equal
-- part has that (a held lease's replica counts while its lease lives).
local function share(lim)
  local dem = {}
  local h = redis.call('HGETALL', KEYS[3])
  for i = 1, #h, 2 do
    if h[i] ~= me then dem[h[i]] = tonumber(h[i+1]) end
  end
  for _, o in ipairs(others) do dem[o[1]] = (dem[o[1]] or 0) + o[3] end
  local ds = {}
  for _, v in pairs(dem) do
    if v > 0 then ds[#ds + 1] = v end
  end
  table.sort(ds)
  local left, k = math.max(1, math.floor(lim)), #ds + 1
  for _, v in ipairs(ds) do
    if v * k >= left then break end
    left, k = left - v, k - 1
  end
  return math.floor(left / k * 1000)
end
for _, o in ipairs(others) do
  local h = tonumber(redis.call('HGET', KEYS[3], o[1]) or '0')
  if h < mine or h == mine and o[2] < since then first = false end
end
local wttl, idle = tonumber(ARGV[6]), tonumber(ARGV[5])
if first and held < math.max(1, math.floor(limit)) then
  local ttl = math.min(2 * (tonumber(st[2]) or 0) + tonumber(ARGV[7]), tonumber(ARGV[8]))
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
  redis.call('HINCRBY', KEYS[3], me, 1)
  if want > 1 then
    redis.call('HSET', KEYS[4], me, (want - 1) .. ' ' .. (now + wttl) .. ' ' .. now)
  else
    redis.call('HDEL', KEYS[4], me)
  end
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
  return {1, now, share(limit)}
end
redis.call('HSET', KEYS[4], me, want .. ' ' .. (now + wttl) .. ' ' .. since)
redis.call('PEXPIRE', KEYS[4], idle)
return {0, tonumber(ARGV[10]), share(limit)}
`)

// releaseScript: KEYS as acquireScript's. ARGV: this replica, the lease
// id, the outcome (0 other, 1 answered, 2 congestion refusal), when the
// lease was granted (Redis ms), the limit's ceiling, the counted level's
// probe wait and its maximum (ms), the wake channel. It moves the limit
// (see the package comment above), frees the lease and, when a slot is
// free, publishes the waiting replica whose turn it is (the fewest leases
// held), so that it asks at once instead of at its next poll.
var releaseScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function wake()
  local limit = tonumber(redis.call('HGET', KEYS[1], 'limit') or '1')
  if redis.call('ZCARD', KEYS[2]) >= math.max(1, math.floor(limit)) then return end
  local w = redis.call('HGETALL', KEYS[4])
  local best, bh, bl = nil, nil, nil
  for i = 1, #w, 2 do
    local n, exp, last = string.match(w[i+1], '^(%S+) (%S+) (%S+)$')
    n, exp, last = tonumber(n), tonumber(exp), tonumber(last)
    if exp > now and n > 0 then
      local h = tonumber(redis.call('HGET', KEYS[3], w[i]) or '0')
      if not bh or h < bh or h == bh and last < bl then best, bh, bl = w[i], h, last end
    end
  end
  if best then redis.call('PUBLISH', ARGV[8], best) end
end
local function update()
  local gone = redis.call('ZREM', KEYS[2], ARGV[2])
  if gone == 1 and redis.call('HINCRBY', KEYS[3], ARGV[1], -1) <= 0 then redis.call('HDEL', KEYS[3], ARGV[1]) end
  local o = tonumber(ARGV[3])
  if o == 0 then return 0 end
  local s = redis.call('HMGET', KEYS[1], 'limit', 'ss', 'cut', 'level', 'counted', 'reached', 'probe', 'svchi')
  local limit = tonumber(s[1])
  if not limit then return 0 end
  local ss, cut, level = tonumber(s[2]) or 0, tonumber(s[3]) or 0, tonumber(s[4]) or 0
  local counted, reached, probe = tonumber(s[5]) or 0, tonumber(s[6]) or 0, tonumber(s[7]) or tonumber(ARGV[6])
  local sent = tonumber(ARGV[4])
  local held = redis.call('ZCARD', KEYS[2]) + gone
  if o == 1 then
    local d = math.max(now - sent, 0)
    local svchi = tonumber(s[8]) or 0
    if d >= svchi then svchi = d else svchi = svchi + 0.05 * (d - svchi) end
    if held * 2 >= limit then
      if ss == 1 then
        limit = limit + 1
      elseif limit < level then
        limit = math.min(level, limit + 1 / limit)
      elseif counted == 1 then
        if reached == 0 then reached = now end
        if now - reached >= probe then limit = limit + 1 / limit end
      else
        limit = limit + 1 / limit
      end
    end
    limit = math.min(limit, tonumber(ARGV[5]))
    redis.call('HSET', KEYS[1], 'limit', limit, 'reached', reached, 'svchi', svchi)
    return 1
  end
  if cut > 0 and sent < cut then
    if counted == 1 and level > 1 then
      level = level - 1
      redis.call('HSET', KEYS[1], 'limit', math.min(limit, level), 'level', level)
    end
    return 2
  end
  if counted == 1 and reached > 0 and limit > level then
    limit = level
    probe = math.min(probe * 2, tonumber(ARGV[7]))
  elseif held - 1 >= 2 then
    level = held - 1
    limit = math.min(limit, level)
    counted = 1
    probe = tonumber(ARGV[6])
  else
    level = limit
    limit = math.max(limit * 0.5, 1)
    counted = 0
  end
  redis.call('HSET', KEYS[1], 'limit', limit, 'ss', 0, 'cut', now, 'level', level, 'counted', counted, 'reached', 0, 'probe', probe)
  return 2
end
local r = update()
wake()
return r
`)

// gates is the fleet's gate state per target.
type gates struct {
	mu      sync.Mutex
	targets map[string]*gateTarget
}

// gateTarget is one target's gate on this replica: its waiters, and the
// poller that asks Redis for their leases while any wait.
type gateTarget struct {
	f       *Fleet
	keys    []string // state, leases, held, waiting
	channel string   // where releases wake this target's waiting replicas
	wake    chan struct{}

	mu        sync.Mutex
	waiters   []*gateWaiter // in arrival order
	busySince time.Time     // when the queue last became non-empty
	polling   bool
	seq       uint64
	svcHi     float64 // seconds: the upper envelope of answers' times (see lease.release)

	share atomic.Uint64 // float64 bits: this replica's share of the limit at the last call (see Share)
}

type gateWaiter struct {
	rank           int
	queued, sendBy time.Time
	ready          chan struct{} // closed with lease set, or nil: go without the gate
	lease          *lease
}

// lease is one attempt's share of a target's limit.
type lease struct {
	t    *gateTarget
	id   string
	sent int64     // when it was granted, Redis ms
	at   time.Time // the same, this replica's clock
}

// errGateTimeout ends a wait for the gate that outlasted the time an
// answer needs before the deadline.
var errGateTimeout = errors.New("fleet: the capacity gate had no room before the deadline")

// Acquire is upstream.Gate's: it waits for a lease of target's limit in
// Redis. Without Redis, or while it is down, nil (the lane alone).
func (f *Fleet) Acquire(ctx context.Context, target string, rank int, sendBy time.Time) (func(lane.Outcome, bool), error) {
	if f.ro == nil {
		return nil, nil
	}
	t := f.gateFor(target)
	if t == nil || !f.up.Load() {
		f.stats.gateBypassed.Add(1)
		return nil, nil
	}
	// Every request waits for the poller, even alone: one call at a time
	// per target, so that a burst does not dial a connection per request
	// on a busy machine, past the timeout, and mark Redis down.
	t.mu.Lock()
	w := &gateWaiter{rank: rank, queued: time.Now(), sendBy: sendBy, ready: make(chan struct{})}
	if len(t.waiters) == 0 {
		t.busySince = w.queued
	}
	t.waiters = append(t.waiters, w)
	if !t.polling {
		t.polling = true
		go t.poll()
	}
	t.mu.Unlock()
	timer := time.NewTimer(time.Until(sendBy))
	defer timer.Stop()
	select {
	case <-w.ready:
	case <-ctx.Done():
	case <-timer.C:
	}
	t.mu.Lock()
	select {
	case <-w.ready:
		t.mu.Unlock()
		switch {
		case w.lease == nil:
			f.stats.gateBypassed.Add(1)
			return nil, nil
		case ctx.Err() != nil:
			w.lease.release(lane.Other, false)
			return nil, ctx.Err()
		}
		return w.lease.release, nil
	default:
		t.remove(w)
		t.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.stats.gateTimeouts.Add(1)
	return nil, errGateTimeout
}

// Share is upstream.Gate's: how many attempts this replica may hold on the
// lane target, as the gate said at its last call (0: it has not been
// asked). It is this replica's max-min share of the fleet's limit (see
// acquireScript), rounded up to whole slots: the caller caps the lane's
// limit at it (lane.Lane.Cap), so that when Redis goes the fleet sends
// about what the model admits (the whole limit plus less than one attempt
// per replica) instead of what every gated lane grew to. Whole slots, not
// the exact share: a lane below one slot paces its sends, and a lane
// seeded at its share below one slot held back what the gate would grant
// it (see capacity.go).
func (f *Fleet) Share(target string) float64 {
	f.gates.mu.Lock()
	t := f.gates.targets[target]
	f.gates.mu.Unlock()
	if t == nil {
		return 0
	}
	s := math.Float64frombits(t.share.Load())
	if s <= 0 {
		return 0
	}
	return math.Ceil(s)
}

// gateFor returns target's gate, made at its first use; nil past
// maxGateTargets.
func (f *Fleet) gateFor(target string) *gateTarget {
	f.gates.mu.Lock()
	defer f.gates.mu.Unlock()
	if t := f.gates.targets[target]; t != nil {
		return t
	}
	if f.gates.targets == nil {
		f.gates.targets = map[string]*gateTarget{}
	}
	if len(f.gates.targets) >= maxGateTargets {
		return nil
	}
	t := &gateTarget{f: f, keys: []string{f.key("gate", target), f.key("gate", target, "leases"),
		f.key("gate", target, "held"), f.key("gate", target, "waiting")},
		channel: f.key("gatefree", target), wake: make(chan struct{}, 1)}
	f.gates.targets[target] = t
	return t
}

// try asks Redis for a lease, reporting want requests waiting here: a
// lease, or the delay before asking again, or the call's error (counted as
// a fault).
func (t *gateTarget) try(want int) (*lease, time.Duration, error) {
	f := t.f
	t.mu.Lock()
	t.seq++
	id := f.id + ":" + strconv.FormatUint(t.seq, 36)
	t.mu.Unlock()
	start := 0.0
	if st := f.capacity.Load(); st != nil {
		start = st.of(t.name()).limit // the fleet's estimate: every replica's limit summed
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	res, err := acquireScript.Run(ctx, f.rdb.Load(), t.keys, f.id, id, want, start, gateIdle.Milliseconds(),
		gateWaitTTL.Milliseconds(), gateLeaseSlack.Milliseconds(), gateLeaseMax.Milliseconds(), gateProbeWait.Milliseconds(),
		gatePoll.Milliseconds(), gateColdLimit).Int64Slice()
	cancel()
	if err == nil && len(res) != 3 {
		err = errors.New("unexpected reply")
	}
	if err != nil {
		f.fault(err, false)
		return nil, 0, err
	}
	f.fails.Store(0)
	t.share.Store(math.Float64bits(float64(res[2]) / 1000))
	if res[0] == 1 {
		f.stats.gateGrants.Add(1)
		return &lease{t: t, id: id, sent: res[1], at: time.Now()}, 0, nil
	}
	f.stats.gateDenials.Add(1)
	return nil, time.Duration(res[1]) * time.Millisecond, nil
}

// name is the target's name, from its state key.
func (t *gateTarget) name() string {
	return t.keys[0][len(t.f.key("gate"))+1:]
}

// poll asks Redis for leases while requests wait here, one call at a
// time, handing each lease to the waiter next (see pick), and asking again
// when a release wakes it (see wakeups) or after the delay Redis named.
// When Redis fails, every waiter goes without the gate.
func (t *gateTarget) poll() {
	f := t.f
	for {
		t.mu.Lock()
		n := len(t.waiters)
		if n == 0 || !f.up.Load() {
			t.open()
			t.mu.Unlock()
			if n == 0 {
				t.withdraw()
			}
			return
		}
		t.mu.Unlock()
		l, delay, err := t.try(n)
		if err != nil {
			t.mu.Lock()
			t.open()
			t.mu.Unlock()
			return
		}
		if l != nil {
			t.mu.Lock()
			if w := t.pick(time.Now()); w != nil {
				w.lease = l
				close(w.ready)
				t.mu.Unlock()
				continue
			}
			t.mu.Unlock()
			l.release(lane.Other, false) // its waiter left meanwhile
			continue
		}
		select {
		case <-time.After(delay):
		case <-t.wake:
		case <-f.stop:
			t.mu.Lock()
			t.open()
			t.mu.Unlock()
			return
		}
	}
}

// open lets every waiter go without the gate and ends the poller. The
// caller holds t.mu.
func (t *gateTarget) open() {
	for _, w := range t.waiters {
		close(w.ready)
	}
	t.waiters, t.polling = nil, false
}

// withdraw removes this replica's report of waiting requests, so that no
// other replica defers to it for gateWaitTTL.
func (t *gateTarget) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), t.f.opts.Timeout)
	defer cancel()
	if err := t.f.rdb.Load().HDel(ctx, t.keys[3], t.f.id).Err(); err != nil {
		t.f.fault(err, false)
	}
}

// pick takes the waiter to serve out of the queue: the first of the best
// rank, or under sustained queueing the newest of it, unless the oldest of
// it has waited as long as it has left (lane.next's order). The caller
// holds t.mu.
func (t *gateTarget) pick(now time.Time) *gateWaiter {
	if len(t.waiters) == 0 {
		return nil
	}
	first, last := -1, -1 // the oldest and the newest of the best rank
	for i, w := range t.waiters {
		switch {
		case first < 0 || w.rank < t.waiters[first].rank:
			first, last = i, i
		case w.rank == t.waiters[first].rank:
			last = i
		}
	}
	i := first
	if o := t.waiters[first]; now.Sub(t.busySince) >= gateLIFOAfter && now.Sub(o.queued) < o.sendBy.Sub(now) {
		i = last
	}
	w := t.waiters[i]
	t.removeAt(i)
	return w
}

// remove takes w out of the queue. The caller holds t.mu.
func (t *gateTarget) remove(w *gateWaiter) {
	for i, x := range t.waiters {
		if x == w {
			t.removeAt(i)
			return
		}
	}
}

func (t *gateTarget) removeAt(i int) {
	t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
	if len(t.waiters) == 0 {
		t.busySince = time.Time{}
	}
}

// release gives the lease back with its attempt's outcome: at once (the
// Redis call in the background, so that no answer waits for it), or, for
// an attempt whose client went away before its answer, when the lane frees
// its slot (lane.Abandon: the provider goes on generating it).
func (l *lease) release(o lane.Outcome, abandoned bool) {
	t := l.t
	t.mu.Lock()
	long := time.Duration(t.svcHi * float64(time.Second))
	if o == lane.Answered {
		const alpha = 0.05 // lane/adaptive.go's serviceHi: up at once, down slowly
		if d := time.Since(l.at).Seconds(); d >= t.svcHi {
			t.svcHi = d
		} else {
			t.svcHi += alpha * (d - t.svcHi)
		}
	}
	t.mu.Unlock()
	if abandoned {
		if hold := time.Until(l.at.Add(long)); hold > 0 {
			time.AfterFunc(hold, func() { l.send(lane.Other) })
			return
		}
		o = lane.Other
	}
	go l.send(o)
}

func (l *lease) send(o lane.Outcome) {
	f := l.t.f
	code := 0
	switch o {
	case lane.Answered:
		code = 1
	case lane.Congested:
		code = 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
	err := releaseScript.Run(ctx, f.rdb.Load(), l.t.keys, f.id, l.id, code, l.sent, lane.DefaultMaxConcurrency,
		gateProbeWait.Milliseconds(), gateMaxProbeWait.Milliseconds(), l.t.channel).Err()
	cancel()
	if err != nil {
		// The lease expires in Redis on its own (see acquireScript).
		f.stats.gateLost.Add(1)
		f.fault(err, false)
		return
	}
	f.fails.Store(0)
}

// subscribe listens for the releases that wake this replica's pollers
// (releaseScript publishes whose turn a free slot is), on a connection of
// its own that go-redis re-establishes after an outage; the polls' delay
// covers any wake lost meanwhile. The caller holds no lock; Close ends it.
func (f *Fleet) subscribe(ro *redis.Options) {
	f.subc = redis.NewClient(ro)
	f.sub = f.subc.PSubscribe(context.Background(), f.key("gatefree", "*"))
	prefix := f.key("gatefree") + ":"
	ch := f.sub.Channel(redis.WithChannelHealthCheckInterval(f.opts.Heartbeat))
	go func() {
		for m := range ch {
			if m.Payload != f.id {
				continue
			}
			f.gates.mu.Lock()
			t := f.gates.targets[strings.TrimPrefix(m.Channel, prefix)]
			f.gates.mu.Unlock()
			if t != nil {
				select {
				case t.wake <- struct{}{}:
				default:
				}
			}
		}
	}()
}
