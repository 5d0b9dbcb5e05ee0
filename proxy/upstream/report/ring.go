package report

import (
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// RefusalRateSpan is the span TargetStats.RefusalRate is measured over:
// long enough that a dashboard polling every few seconds sees each refusal
// in more than one poll, short enough that the figure is what the model
// does now (the cumulative Refusals say what it did since start).
const RefusalRateSpan = 10 * time.Second

// RefusalRing counts refusals by limit in one-second cells over the last
// RefusalRateSpan.
type RefusalRing struct {
	mu  sync.Mutex
	sec [refusalCells]int64 // the unix second each cell counts
	n   [refusalCells][len(lane.Limits)]uint32
}

const refusalCells = int(RefusalRateSpan / time.Second)

// Add counts a refusal on lane.Limits[limit] at now.
func (r *RefusalRing) Add(now time.Time, limit int) {
	sec := now.Unix()
	i := int(sec % int64(refusalCells))
	r.mu.Lock()
	if r.sec[i] != sec {
		r.sec[i], r.n[i] = sec, [len(lane.Limits)]uint32{}
	}
	r.n[i][limit]++
	r.mu.Unlock()
}

// Rates are the refusals per second by limit over the RefusalRateSpan
// ending at now; nil when there were none.
func (r *RefusalRing) Rates(now time.Time) map[string]float64 {
	sec := now.Unix()
	var sum [len(lane.Limits)]uint32
	r.mu.Lock()
	for i := range r.sec {
		if s := r.sec[i]; s > sec-int64(refusalCells) && s <= sec {
			for l, n := range r.n[i] {
				sum[l] += n
			}
		}
	}
	r.mu.Unlock()
	var out map[string]float64
	for l, n := range sum {
		if n > 0 {
			if out == nil {
				out = make(map[string]float64, len(lane.Limits))
			}
			out[lane.Limits[l]] = Round(float64(n) / RefusalRateSpan.Seconds())
		}
	}
	return out
}
