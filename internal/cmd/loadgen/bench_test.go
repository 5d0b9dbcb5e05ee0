package loadgen

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// cacheServer mimics Breakwater's headers: a question seen before is a
// hit-exact, a new one a miss answered after delay.
func cacheServer(delay time.Duration) *httptest.Server {
	var mu sync.Mutex
	seen := map[string]bool{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		q := body.Messages[0].Content
		mu.Lock()
		hit := seen[q]
		seen[q] = true
		mu.Unlock()
		if hit {
			w.Header().Set("X-Breakwater-Cache", "hit-exact")
		} else {
			w.Header().Set("X-Breakwater-Cache", "miss")
			time.Sleep(delay)
		}
		w.Write([]byte(`{"choices":[]}`))
	}))
}

func TestBench(t *testing.T) {
	tests := []struct {
		name    string
		handler http.Handler
		cfg     Config
		check   func(t *testing.T, s *Summary)
	}{
		{
			name:    "sim at capacity",
			handler: sim.NewHandler(sim.Options{Capacity: 2, Latency: 100 * time.Millisecond}),
			cfg:     Config{Rate: 100, Requests: 30},
			check: func(t *testing.T, s *Summary) {
				if s.RateLimited == 0 || s.OK == 0 {
					t.Errorf("ok = %d, 429 = %d: want both above 0", s.OK, s.RateLimited)
				}
				if got, want := s.ByOutcome[OutcomeDirect].Count, 30; got != want {
					t.Errorf("direct answers = %d, want %d", got, want)
				}
				if got, want := s.UpstreamSaved, 0; got != want {
					t.Errorf("saved = %d, want %d", got, want)
				}
			},
		},
		{
			name:    "cache outcomes",
			handler: nil, // cacheServer
			cfg:     Config{Rate: 200, Requests: 60, Mix: Mix{Repeat: 0.5, Seed: 4}},
			check: func(t *testing.T, s *Summary) {
				if got, want := s.OK, 60; got != want {
					t.Errorf("ok = %d, want %d", got, want)
				}
				if got, want := s.UpstreamSaved, s.ByOutcome[OutcomeHitExact].Count; got != want || got < s.ByKind[KindRepeat].Count {
					t.Errorf("saved = %d, want %d and at least the %d repeats", got, want, s.ByKind[KindRepeat].Count)
				}
				if s.ByOutcome[OutcomeMiss].Latency.P50 < 20*time.Millisecond {
					t.Errorf("miss p50 = %s, want the server's delay", s.ByOutcome[OutcomeMiss].Latency.P50)
				}
			},
		},
		{
			name:    "open loop drops beyond max in flight",
			handler: sim.NewHandler(sim.Options{Latency: 400 * time.Millisecond}),
			cfg:     Config{Rate: 100, Requests: 20, MaxInFlight: 5},
			check: func(t *testing.T, s *Summary) {
				if got, want := s.Sent, 5; got != want {
					t.Errorf("sent = %d, want %d", got, want)
				}
				if got, want := s.Dropped, 15; got != want {
					t.Errorf("dropped = %d, want %d", got, want)
				}
			},
		},
		{
			name:    "open loop does not wait for answers",
			handler: sim.NewHandler(sim.Options{Latency: 300 * time.Millisecond}),
			cfg:     Config{Rate: 50, Duration: 400 * time.Millisecond},
			check: func(t *testing.T, s *Summary) {
				if got, want := s.Scheduled, 20; got != want {
					t.Errorf("scheduled = %d, want %d", got, want)
				}
				// Closed loop would take 20 × 300ms.
				if s.Elapsed > 2*time.Second {
					t.Errorf("elapsed = %s: requests waited for each other", s.Elapsed)
				}
				if s.AchievedRate < 35 || s.AchievedRate > 65 {
					t.Errorf("achieved rate = %.1f, want about 50", s.AchievedRate)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv *httptest.Server
			if tt.handler == nil {
				srv = cacheServer(30 * time.Millisecond)
			} else {
				srv = httptest.NewServer(tt.handler)
			}
			defer srv.Close()
			tt.cfg.URL = srv.URL
			s, err := Bench(t.Context(), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.OK+s.RateLimited+s.ServerErrors+s.ClientErrors+s.Errors, s.Sent; got != want {
				t.Errorf("status counts sum to %d, want %d sent", got, want)
			}
			tt.check(t, s)
		})
	}
}

func TestRunJSON(t *testing.T) {
	srv := httptest.NewServer(sim.NewHandler(sim.Options{}))
	defer srv.Close()
	var out, errb bytes.Buffer
	err := Run(t.Context(), []string{"-url", srv.URL + "/v1", "-rate", "100", "-requests", "10", "-json"}, &out, &errb)
	if err != nil {
		t.Fatalf("run: %v (%s)", err, errb.String())
	}
	var s struct {
		OK        int `json:"ok"`
		Scheduled int `json:"scheduled"`
		Latency   struct {
			P50 float64 `json:"p50_ms"`
		} `json:"latency"`
		ByOutcome map[string]json.RawMessage `json:"by_outcome"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if got, want := s.OK, 10; got != want {
		t.Errorf("ok = %d, want %d", got, want)
	}
	if _, ok := s.ByOutcome[OutcomeDirect]; !ok {
		t.Errorf("by_outcome = %v, want a direct group", s.ByOutcome)
	}
	if s.Latency.P50 <= 0 {
		t.Errorf("p50 = %v, want > 0", s.Latency.P50)
	}
}

func TestRunText(t *testing.T) {
	srv := httptest.NewServer(sim.NewHandler(sim.Options{}))
	defer srv.Close()
	var out, errb bytes.Buffer
	if err := Run(t.Context(), []string{"-url", srv.URL, "-rate", "100", "-requests", "5"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"200: 5", "latency (ok)", "direct"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-repeat", "0.8", "-paraphrase", "0.4"},
		{"-zipf", "1"},
		{"-workload", "qqp", "-pairs", "/nonexistent"},
		{"stray"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := Run(t.Context(), args, &out, &errb); err == nil {
				t.Errorf("Run(%q) = nil, want an error", args)
			}
		})
	}
}
