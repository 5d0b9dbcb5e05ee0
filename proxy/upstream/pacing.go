package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/internal/retry"
)

// pacer holds a target back until the upstream's rate-limit window resets, so the
// caller slows down before the upstream starts refusing (issue 4: pacing per
// target). It learns from x-ratelimit-* headers on every answer and from the
// Retry-After of a 429.
type pacer struct {
	mu    sync.Mutex
	until time.Time
}

// lowWatermark is the remaining count at or below which a target is held back
// until its reset. 0: spend the whole budget, then wait; concurrent requests may
// still overshoot by their number, and the 429 they get is handled as usual.
const lowWatermark = 0

// defaultReset is assumed when an upstream reports an exhausted budget without
// saying when it resets.
const defaultReset = time.Second

// wait returns how long new attempts must wait at now.
func (p *pacer) wait(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// hold keeps new attempts back until t.
func (p *pacer) hold(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.After(p.until) {
		p.until = t
	}
}

// observe reads x-ratelimit-remaining-{requests,tokens} and the matching
// x-ratelimit-reset-* headers (Go durations such as "1s", "6m0s", "20ms", or
// seconds) and holds the target back when a budget is exhausted. It returns the
// hold it applied, 0 for none.
func (p *pacer) observe(now time.Time, h http.Header) time.Duration {
	var hold time.Duration
	for _, kind := range [...]string{"requests", "tokens"} {
		v := strings.TrimSpace(h.Get("X-Ratelimit-Remaining-" + kind))
		if v == "" {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n > lowWatermark {
			continue
		}
		d, ok := parseReset(h.Get("X-Ratelimit-Reset-" + kind))
		if !ok {
			d = defaultReset
		}
		hold = max(hold, d)
	}
	if hold > 0 {
		p.hold(now.Add(hold))
	}
	return hold
}

func parseReset(v string) (time.Duration, bool) { return retry.Reset(v) }
