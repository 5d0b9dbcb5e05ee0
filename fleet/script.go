package fleet

import "github.com/redis/go-redis/v9"

// The budgets' scripts run the arithmetic of gcra.go inside Redis, so a
// reservation over every bucket a request draws on is one atomic step
// across all replicas (Redis runs a script with nothing interleaved) on
// the server's own clock (TIME), never on the replicas' clocks.
//
// Not go-redis/redis_rate: its GCRA takes one limit per call and has no
// way to give units back, while a request here takes from up to three
// limits of several budgets at once (all or none), and is reconciled with
// the usage its answer reports, or refunded when no answer came.

// reserveScript: KEYS are the buckets; ARGV holds, per key, its period in
// milliseconds, its limit and the cost. It returns {1, remaining...} when
// every bucket had room (and took the cost), else {0, index (1-based),
// retry after in ms, remaining of that bucket}.
var reserveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local next = {}
local out = {1}
for i = 1, #KEYS do
  local period = tonumber(ARGV[3*i-2])
  local limit = tonumber(ARGV[3*i-1])
  local cost = math.min(tonumber(ARGV[3*i]), limit)
  local em = period / limit
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local n = tat + cost * em
  if n - now > period + 0.000001 then
    return {0, i, math.ceil(n - now - period), math.floor(math.max(0, (period - (tat - now)) / em))}
  end
  next[i] = n
  out[i+1] = math.floor(math.max(0, (period - (n - now)) / em))
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.3f', next[i]), 'PX', math.ceil(next[i] - now) + 1000)
end
return out
`)

// adjustScript: KEYS are the buckets; ARGV holds, per key, its period,
// its limit and the units to add (negative: a refund). A bucket goes at
// most two periods into debt.
var adjustScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
for i = 1, #KEYS do
  local period = tonumber(ARGV[3*i-2])
  local em = period / tonumber(ARGV[3*i-1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tat = math.min(tat + tonumber(ARGV[3*i]) * em, now + 2 * period)
  if tat > now then
    redis.call('SET', KEYS[i], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
  else
    redis.call('DEL', KEYS[i])
  end
end
return 1
`)

// heartbeatScript: KEYS[1] is the sorted set of live replicas (score: when
// the replica's beat expires, in ms); ARGV[1] this replica's id, ARGV[2]
// the beat's TTL in ms. It drops expired beats, renews this one and
// returns how many replicas are live.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return redis.call('ZCARD', KEYS[1])
`)
