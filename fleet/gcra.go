package fleet

import (
	"math"
	"sync"
	"time"
)

// The budgets are GCRA buckets (the generic cell rate algorithm, ITU-T
// I.371; a token bucket kept as one number): a bucket of limit units that
// refills evenly over its period stores only its theoretical arrival time
// (TAT), the moment it would be full again. Taking cost units moves the TAT
// cost × period/limit later; a take is refused when the TAT would end up
// more than one period ahead of now. The Redis scripts (script.go) and the
// local buckets below run the same arithmetic, in milliseconds.

// take is one bucket's share of a reservation: its period and limit, and
// the units to take (a request, or tokens).
type take struct {
	key    string
	period float64 // milliseconds
	limit  float64
	cost   float64
}

// verdict is the outcome of a reservation over several buckets, all or
// nothing: Refused is the index of the first bucket that refused (-1:
// admitted), RetryAfter when it will have room, Remaining what each bucket
// has left (after the take when admitted).
type verdict struct {
	Refused    int
	RetryAfter time.Duration
	Remaining  []int64
}

// localBuckets are the buckets of one replica: a budget without Redis, and
// the share a replica keeps while Redis is unreachable. Bounded to
// maxLocalBuckets; a bucket whose TAT has passed is full, the same as an
// absent one, so those are dropped first.
type localBuckets struct {
	mu  sync.Mutex
	tat map[string]float64
}

const maxLocalBuckets = 16384

func nowMillis(t time.Time) float64 { return float64(t.UnixNano()) / 1e6 }

// reserve takes every take's cost from its bucket, its limit divided by
// share (the live replicas while Redis is unreachable, else 1), or from
// none when one refuses.
func (l *localBuckets) reserve(now time.Time, takes []take, share float64) verdict {
	ms := nowMillis(now)
	v := verdict{Refused: -1, Remaining: make([]int64, len(takes))}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tat == nil {
		l.tat = map[string]float64{}
	}
	next := make([]float64, len(takes))
	for i, tk := range takes {
		limit := math.Max(tk.limit/share, 1)
		em := tk.period / limit
		tat := math.Max(l.tat[tk.key], ms)
		n := tat + math.Min(tk.cost, limit)*em
		if n-ms > tk.period+1e-6 {
			v.Refused = i
			v.RetryAfter = time.Duration((n - ms - tk.period) * float64(time.Millisecond))
			v.Remaining[i] = int64(math.Max(0, (tk.period-(tat-ms))/em))
			return v
		}
		next[i] = n
		v.Remaining[i] = int64(math.Max(0, (tk.period-(n-ms))/em))
	}
	if len(l.tat)+len(takes) > maxLocalBuckets {
		l.sweep(ms)
	}
	for i, tk := range takes {
		l.tat[tk.key] = next[i]
	}
	return v
}

// adjust moves each bucket by its take's cost (negative: a refund), never
// more than two periods into debt.
func (l *localBuckets) adjust(now time.Time, takes []take, share float64) {
	ms := nowMillis(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tat == nil {
		l.tat = map[string]float64{}
	}
	for _, tk := range takes {
		limit := math.Max(tk.limit/share, 1)
		em := tk.period / limit
		tat := math.Max(l.tat[tk.key], ms)
		tat = math.Min(tat+tk.cost*em, ms+2*tk.period)
		if tat <= ms {
			delete(l.tat, tk.key)
			continue
		}
		if len(l.tat) >= maxLocalBuckets {
			l.sweep(ms)
		}
		l.tat[tk.key] = tat
	}
}

// sweep drops the full buckets, and every bucket if that was not enough
// (bounded memory wins over a budget's memory of a flood of tenants).
func (l *localBuckets) sweep(ms float64) {
	for k, tat := range l.tat {
		if tat <= ms {
			delete(l.tat, k)
		}
	}
	if len(l.tat) >= maxLocalBuckets/2 {
		clear(l.tat)
	}
}
