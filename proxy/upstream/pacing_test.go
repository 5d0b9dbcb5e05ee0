package upstream

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
