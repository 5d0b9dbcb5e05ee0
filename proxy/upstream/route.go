package upstream

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/breaker"
	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
	reports "github.com/breakwater-dev/breakwater/proxy/upstream/report"
)

// Weight dynamics: each failure multiplies a target's weight by
// weightDecay, each success closes weightRecovery of the gap to the configured
// weight, and the weight never drops below weightFloor of the configured one.
const (
	weightDecay    = 0.7
	weightRecovery = 0.2
	weightFloor    = 0.05
)

// target is the shared state of one target name: breaker, pacer, dynamic weight
// and counters. The dynamic weight is kept as a factor of the configured weight so
// that routes listing the same target with different weights share its health.
type target struct {
	name      string
	model     string // "" = unchanged
	up        *upstream
	breaker   *breaker.Breaker
	lanes     *lane.Set
	counts    laneCounts
	stats     targetStats
	cfgWeight float64 // weight of the first route entry, for the weight metric
	c         *Caller

	mu     sync.Mutex
	factor float64 // in [weightFloor, 1]

	lastOK      atomic.Int64 // unix nanoseconds of the last success, 0 = never
	lastRefused atomic.Int64 // of the last congestion refusal (429, 529, overload), 0 = never
}

// answeredWithin reports whether t answered successfully within d before now.
func (t *target) answeredWithin(now time.Time, d time.Duration) bool {
	return within(t.lastOK.Load(), now, d)
}

// refusedWithin reports whether t refused an attempt for congestion within
// d before now: it is up, and full.
func (t *target) refusedWithin(now time.Time, d time.Duration) bool {
	return within(t.lastRefused.Load(), now, d)
}

func within(last int64, now time.Time, d time.Duration) bool {
	return last != 0 && now.Sub(time.Unix(0, last)) <= d
}

func (t *target) weightFactor() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.factor
}

// adjust applies a verdict to the dynamic weight and returns the new factor.
func (t *target) adjust(v verdict) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch v {
	case failure, congested:
		t.factor = max(t.factor*weightDecay, weightFloor)
	case success:
		t.factor += (1 - t.factor) * weightRecovery
		if t.factor > 1-1e-9 {
			t.factor = 1
		}
	}
	return t.factor
}

// member is a target as listed by one route.
type member struct {
	t        *target
	priority int
	weight   float64 // configured
}

func (m *member) effectiveWeight() float64 { return m.weight * m.t.weightFactor() }

// route is a requested model's targets grouped by ascending priority.
type route struct {
	name   string
	groups [][]*member
	flat   []*member // in config order, for Snapshot
}

func newRoute(name string, members []*member) *route {
	r := &route{name: name, flat: members}
	sorted := slices.Clone(members)
	slices.SortStableFunc(sorted, func(a, b *member) int { return a.priority - b.priority })
	for i, m := range sorted {
		if i == 0 || m.priority != sorted[i-1].priority {
			r.groups = append(r.groups, nil)
		}
		r.groups[len(r.groups)-1] = append(r.groups[len(r.groups)-1], m)
	}
	return r
}

// pick chooses among candidates by effective weight, preferring targets whose
// breaker admits and that are not paced; it returns -1 when no breaker admits.
// Paced targets are chosen only when nothing else admits: waiting for a reset is
// the last resort within a priority.
func pick(candidates []*member, now time.Time, rnd func() float64, h http.Header) int {
	var ready, paced []int
	for i, m := range candidates {
		if !m.t.breaker.Peek(now) {
			continue
		}
		if m.t.laneFor(laneKey(h, m.t.up.cfg)).Wait(now) > 0 {
			paced = append(paced, i)
		} else {
			ready = append(ready, i)
		}
	}
	if len(ready) == 0 {
		ready = paced
	}
	switch len(ready) {
	case 0:
		return -1
	case 1:
		return ready[0]
	}
	weights := make([]float64, len(ready))
	var sum float64
	for j, i := range ready {
		weights[j] = candidates[i].effectiveWeight()
		sum += weights[j]
	}
	x := rnd() * sum
	for j, w := range weights {
		if x < w {
			return ready[j]
		}
		x -= w
	}
	return ready[len(ready)-1] // rounding
}

// roundWeight keeps reported weights readable (reports.Round).
func roundWeight(w float64) float64 { return reports.Round(w) }
