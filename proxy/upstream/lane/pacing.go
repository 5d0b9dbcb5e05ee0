package lane

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/lib/retry"
)

// pacer holds a lane (a target, or a target and forwarded key) back until the
// upstream's rate-limit window resets, so the caller slows down before the
// upstream starts refusing. It learns from rate-limit headers on every answer
// and from a refusal's Retry-After.
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

// rateLimitHeaders are the (remaining, reset) header pairs an upstream reports
// its budgets in: OpenAI's x-ratelimit-{remaining,reset}-{requests,tokens}
// (reset as a Go duration such as "6m0s", or seconds) and Anthropic's
// anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,reset}
// (reset as an RFC 3339 time; https://docs.anthropic.com/en/api/rate-limits).
var rateLimitHeaders = [...][2]string{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
}

// observe reads the rate-limit headers and holds the lane back, for at most
// limit, when a budget is exhausted. It returns the hold it applied, 0 for none.
func (p *pacer) observe(now time.Time, h http.Header, limit time.Duration) time.Duration {
	var hold time.Duration
	for _, pair := range rateLimitHeaders {
		v := strings.TrimSpace(h.Get(pair[0]))
		if v == "" {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n > lowWatermark {
			continue
		}
		d, ok := parseReset(h.Get(pair[1]), now)
		if !ok {
			d = defaultReset
		}
		hold = max(hold, d)
	}
	if limit > 0 {
		hold = min(hold, limit)
	}
	if hold > 0 {
		p.hold(now.Add(hold))
	}
	return hold
}

// parseReset reads a reset as a Go duration or seconds (retry.Reset), or as
// an RFC 3339 time relative to now (Anthropic's anthropic-ratelimit-*-reset).
func parseReset(v string, now time.Time) (time.Duration, bool) {
	if d, ok := retry.Reset(v); ok {
		return d, true
	}
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(v)); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
