package lane

import (
	"net/http"
	"testing"
	"time"
)

func TestPacerObserve(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"budget left", map[string]string{"x-ratelimit-remaining-requests": "12", "x-ratelimit-reset-requests": "1s"}, 0},
		{"requests spent", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "20ms"}, 20 * time.Millisecond},
		{"tokens spent", map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}, 6 * time.Minute},
		{"longest reset wins", map[string]string{
			"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m30.5s"}, 90500 * time.Millisecond},
		{"reset in seconds", map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2.5"}, 2500 * time.Millisecond},
		{"no reset header", map[string]string{"x-ratelimit-remaining-requests": "0"}, defaultReset},
		{"no headers", nil, 0},
		{"anthropic requests spent", map[string]string{"anthropic-ratelimit-requests-remaining": "0",
			"anthropic-ratelimit-requests-reset": now.Add(42 * time.Second).UTC().Format(time.RFC3339)}, 42 * time.Second},
		{"anthropic output tokens spent", map[string]string{"anthropic-ratelimit-output-tokens-remaining": "0",
			"anthropic-ratelimit-output-tokens-reset": now.Add(7 * time.Second).UTC().Format(time.RFC3339)}, 7 * time.Second},
		{"anthropic budget left", map[string]string{"anthropic-ratelimit-tokens-remaining": "1200",
			"anthropic-ratelimit-tokens-reset": now.Add(7 * time.Second).UTC().Format(time.RFC3339)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			var p pacer
			if got, want := p.observe(now, h, time.Hour), tt.want; got != want {
				t.Errorf("observe = %s, want %s", got, want)
			}
			if got, want := p.wait(now), tt.want; got != want {
				t.Errorf("wait = %s, want %s", got, want)
			}
			if got := p.wait(now.Add(tt.want)); got != 0 {
				t.Errorf("wait after reset = %s, want 0", got)
			}
		})
	}
}

func TestPacerObserveCapped(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := http.Header{}
	h.Set("x-ratelimit-remaining-tokens", "0")
	h.Set("x-ratelimit-reset-tokens", "6h")
	var p pacer
	if got, want := p.observe(now, h, time.Minute), time.Minute; got != want {
		t.Errorf("observe = %s, want the cap %s", got, want)
	}
}
