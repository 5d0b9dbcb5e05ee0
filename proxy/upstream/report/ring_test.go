package report

import (
	"maps"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// TestRefusalRate: refusals per second count those of the last
// RefusalRateSpan only, each under its limit.
func TestRefusalRate(t *testing.T) {
	var r RefusalRing
	t0 := time.Unix(1_700_000_000, 0)
	r.Add(t0, 1)                            // tokens
	r.Add(t0.Add(3*time.Second), 1)         // tokens
	r.Add(t0.Add(9*time.Second), 0)         // requests
	r.Add(t0.Add(9500*time.Millisecond), 0) // requests, the same second
	if got, want := r.Rates(t0.Add(9*time.Second)), map[string]float64{lane.LimitTokens: 0.2, lane.LimitRequests: 0.2}; !maps.Equal(got, want) {
		t.Errorf("Rates = %v, want %v", got, want)
	}
	// Ten seconds on, the first refusal is out of the span.
	if got, want := r.Rates(t0.Add(10*time.Second)), map[string]float64{lane.LimitTokens: 0.1, lane.LimitRequests: 0.2}; !maps.Equal(got, want) {
		t.Errorf("Rates = %v, want %v", got, want)
	}
	if got := r.Rates(t0.Add(time.Minute)); got != nil {
		t.Errorf("Rates a minute on = %v, want none", got)
	}
	// A cell reused for a later second counts only that second's.
	r.Add(t0.Add(20*time.Second), 1)
	if got, want := r.Rates(t0.Add(20*time.Second)), map[string]float64{lane.LimitTokens: 0.1}; !maps.Equal(got, want) {
		t.Errorf("Rates = %v, want %v", got, want)
	}
}
