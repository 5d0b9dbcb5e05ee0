package fleet

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// One capacity estimate (issue 38): at every heartbeat a replica publishes
// each target's learned concurrency limit and time per answer, with a TTL
// of a few beats, and reads the sum of every live replica's. A lane starts
// from that estimate at its first request (upstream.Options.Seed): the
// fleet's summed limit, past slow start and paced by the fleet's time per
// answer, instead of probing the model from one slot while the others
// already hold it; every lane of the target does, a forwarded key's as
// well as the common one (see capacityState.of). The whole limit, not a share of it: the capacity gate
// (gate.go) divides it among the replicas, and a lane seeded at its share
// (below one slot with six replicas in front of a model of four) held back
// what the gate would grant it. The capacity gate starts a lane's limit in
// Redis from the same estimate when it has none. The lane's own adaptive
// limit is all there is without Redis, while it is down, or before
// anything was learnt.

// estimate is the fleet's view of one target at the last beat.
type estimate struct {
	limit     float64       // summed over the replicas that published
	perAnswer time.Duration // their mean time per answer
	n         int64         // how many published
}

// capacityState is what the last beat learned, read by Seed.
type capacityState struct {
	targets map[string]estimate
	live    int64
}

// capacityScript: KEYS[1] is a target's sorted set of publishers (score:
// when the entry expires, ms), KEYS[2] the hash of their values ("limit
// perAnswerMs"); ARGV[1] this replica's id, ARGV[2] the TTL in ms, ARGV[3]
// its value ("" to only read). It drops expired entries and returns the
// summed limit × 1000, the mean time per answer in µs, and the count.
var capacityScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
if #old > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  redis.call('HDEL', KEYS[2], unpack(old))
end
if ARGV[3] ~= '' then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
local sum, per, n = 0, 0, 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  local sp = string.find(v, ' ')
  sum = sum + tonumber(string.sub(v, 1, sp - 1))
  per = per + tonumber(string.sub(v, sp + 1))
  n = n + 1
end
if n == 0 then return {0, 0, 0} end
return {math.floor(sum * 1000), math.floor(per / n * 1000), n}
`)

// of is the fleet's estimate of the lane name: its own when one was
// published, else its target's (a forwarded key's lane, "target#hash", is
// one more lane of its target's model; the gate then shares out that
// lane's own limit).
func (st *capacityState) of(name string) estimate {
	if e, ok := st.targets[name]; ok {
		return e
	}
	if i := strings.LastIndexByte(name, '#'); i > 0 {
		return st.targets[name[:i]]
	}
	return estimate{}
}

// capacityTTL is how many beats a published estimate outlives: as the
// replicas' beats, one missed beat does not drop it.
const capacityTTL = replicaTTL

// Attach gives the fleet the caller whose learned limits it publishes
// (Caller.Snapshot). Without it a replica publishes nothing but still
// starts from the fleet's estimate.
//
// With Redis up it reads the fleet's estimate of the caller's targets at
// once (bounded calls, at start-up), so that a replica that joins a fleet
// has it before its first request rather than a beat later.
func (f *Fleet) Attach(snapshot func() []upstream.ModelStats) {
	f.snapshot.Store(&snapshot)
	if f.ro != nil && f.up.Load() {
		f.shareCapacity(f.live.Load())
	}
}

// shareCapacity publishes this replica's learned limits and reads the
// fleet's, one bounded call per target; a failed call keeps the last
// estimate of that target out (the lane's own cold start applies).
func (f *Fleet) shareCapacity(live int64) {
	names := map[string]string{} // target → this replica's value ("" = nothing learned)
	if p := f.snapshot.Load(); p != nil {
		for _, m := range (*p)() {
			for _, t := range m.Targets {
				v := ""
				if t.ServiceRate > 0 && t.Limit > 0 {
					per := t.Limit / t.ServiceRate // Little's law: limit ÷ answers per second
					v = strconv.FormatFloat(t.Limit, 'f', 3, 64) + " " + strconv.FormatFloat(per*1000, 'f', 3, 64)
				}
				if names[t.Name] == "" {
					names[t.Name] = v
				}
			}
		}
	}
	prev := f.capacity.Load()
	st := &capacityState{targets: make(map[string]estimate, len(names)), live: live}
	if prev != nil {
		for name := range prev.targets {
			if _, ok := names[name]; !ok {
				names[name] = ""
			}
		}
	}
	ttl := (time.Duration(capacityTTL) * f.opts.Heartbeat).Milliseconds()
	for name, v := range names {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		res, err := capacityScript.Run(ctx, f.rdb.Load(), []string{f.key("capacity", name), f.key("capacity", name, "values")}, f.id, ttl, v).Int64Slice()
		cancel()
		if err != nil || len(res) != 3 {
			f.stats.faults.Add(1)
			continue
		}
		st.targets[name] = estimate{limit: float64(res[0]) / 1000, perAnswer: time.Duration(res[1]) * time.Microsecond, n: res[2]}
	}
	f.capacity.Store(st)
}

// Seed is upstream.Options.Seed: the start of every lane of a target (its
// common lane and each forwarded key's) from the fleet's estimate at the
// last beat, the whole fleet's limit (the capacity gate shares it out, and
// caps the lane at this replica's share from its first lease: Share). 0 (the lane's own cold start) without
// Redis, while it is down, or when this replica is alone and nothing was
// learned.
func (f *Fleet) Seed(target string) (float64, time.Duration) {
	if f.ro == nil {
		return 0, 0
	}
	st := f.capacity.Load()
	if !f.up.Load() || st == nil {
		f.stats.ownStarts.Add(1)
		return 0, 0
	}
	if e := st.of(target); e.n > 0 && e.limit > 0 {
		f.stats.seeded.Add(1)
		return e.limit, e.perAnswer
	}
	// Nothing learnt yet (a lone replica, or a fleet that starts at once):
	// the lane's own cold start. Splitting the cold start between the
	// replicas (ColdSlots ÷ live, paced) was tried and measured no better
	// at 3 and 12 replicas (docs/BENCHMARKS.md), and would hold a fleet in
	// front of a large model to a small share while it probes.
	f.stats.ownStarts.Add(1)
	return 0, 0
}
