package demo

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
)

// failing returns the figures of the checks of c that fail.
func failing(c peakCase) []string {
	var out []string
	for _, ch := range c.checks("row") {
		if !ch.Pass {
			out = append(out, ch.Figure)
		}
	}
	return out
}

// TestPeakTargets evaluates the targets on made-up figures: a run that
// meets every target at its edge passes; one figure beyond it fails that
// target alone, and Problems names it.
func TestPeakTargets(t *testing.T) {
	// Every figure below is at its target's edge: 103 upstream 429s is 25 %
	// of 412, 171 delivered 90 % of 190, 540 answers 90 % of 600, 690 calls
	// 1.15 × 600, 160 answers 80 % of 200, 20 for nobody 10 % of 200.
	straight := Counts{Sent: 600, Answered: 190, RateLimited: 410, Upstream: 600, Upstream429: 412}
	through := Counts{Sent: 600, Answered: 191, Upstream: 703, Upstream429: 103, Reached: 600}
	fleet := through
	fleet.Answered, fleet.Upstream = 540, 690 // 90 % of 600; 1.15 × 600
	impatient := Counts{Sent: 600, Answered: 190, Upstream: 300, Upstream429: 100, Abandoned: 20, Reached: 300}
	noHeader := impatient
	noHeader.Answered = 171
	one := Counts{Answered: 600}
	twelve := slices.Repeat([]int{45}, 12)
	// A token-limited run at its edges: 270 answers 90 % of 300; long 45/60
	// is 0.8× short's 225/240; 50 upstream 429s 25 % of 200; 85 tokens
	// admitted of 100.
	tokStraight := Counts{Sent: 300, Answered: 100, Upstream: 300, Upstream429: 200}
	tokThrough := Side{Total: Counts{Sent: 300, Answered: 270, SentLong: 60, AnsweredLong: 45, Upstream: 320, Upstream429: 50, Reached: 300},
		TokensAdmitted: 85, TokenBudget: 100}
	cases := []struct {
		name   string
		c      peakCase
		mutate func(c *peakCase)
		want   string // the figure that fails once broken
	}{
		{"one sidecar: upstream 429s", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.Upstream429 = 104 }, "upstream 429s 104"},
		{"one sidecar: answered", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.Answered = 190 }, "answered 190/600"},
		{"one sidecar: 5xx", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.ServerError = 1 }, "5xx to the app 1"},
		{"one sidecar: Retry-After", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.NoRetryAfter = 1 }, "429/503 without Retry-After 1"},
		{"one sidecar: past deadline", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.PastDeadline = 1 }, "answered past the deadline 1"},
		{"one sidecar: other errors", peakCase{Straight: straight, Run: PeakRun{Replicas: 1, Side: Side{Total: through}}},
			func(c *peakCase) { c.Run.Total.Other = 1 }, "other errors 1"},
		{"fleet: answered", peakCase{Straight: straight, One: one, Run: PeakRun{Replicas: 3, Side: Side{Total: fleet, PerReplica: []int{180, 180, 180}}}},
			func(c *peakCase) { c.Run.Total.Answered = 539 }, "answered 539/600"},
		{"fleet: calls", peakCase{Straight: straight, One: one, Run: PeakRun{Replicas: 3, Side: Side{Total: fleet, PerReplica: []int{180, 180, 180}}}},
			func(c *peakCase) { c.Run.Total.Upstream = 691 }, "upstream calls 691"},
		{"fleet: fairness", peakCase{Straight: straight, One: one, Run: PeakRun{Replicas: 3, Side: Side{Total: fleet, PerReplica: []int{160, 200, 180}}}},
			func(c *peakCase) { c.Run.PerReplica[0] = 159 }, "answers per replica 159–200"},
		{"header: delivered", peakCase{Straight: straight, ClientTimeout: 3 * time.Second, Run: PeakRun{Replicas: 1, Header: "X-Stainless-Timeout", Side: Side{Total: impatient}}},
			func(c *peakCase) { c.Run.Total.Answered = 189 }, "delivered 189"},
		{"header: for nobody", peakCase{Straight: straight, ClientTimeout: 3 * time.Second, Run: PeakRun{Replicas: 1, Header: "X-Stainless-Timeout", Side: Side{Total: impatient}}},
			func(c *peakCase) { c.Run.Total.Abandoned = 21 }, "made for nobody 21 of 200"},
		{"no header: delivered", peakCase{Straight: straight, ClientTimeout: 3 * time.Second, Run: PeakRun{Replicas: 6, Side: Side{Total: noHeader}}},
			func(c *peakCase) { c.Run.Total.Answered = 170 }, "delivered 170"},
		{"redis: early 429s", peakCase{Straight: straight, One: one, Redis: true, Run: PeakRun{Replicas: 12, Side: Side{Total: fleet, Early429: 5, PerReplica: twelve}}},
			func(c *peakCase) { c.Run.Early429 = 6 }, "upstream 429s in the first 5s 6"},
		{"redis: delivered", peakCase{Straight: straight, ClientTimeout: 3 * time.Second, Redis: true, Run: PeakRun{Replicas: 6, Side: Side{Total: impatient}}},
			func(c *peakCase) { c.Run.Total.Answered = 189 }, "delivered 189"},
		{"tokens: offered", peakCase{Straight: tokStraight, Run: PeakRun{Replicas: 1, Side: tokThrough}},
			func(c *peakCase) { c.Run.Total.Answered = 269 }, "answered 269 of 300 offered"},
		{"tokens: long", peakCase{Straight: tokStraight, Run: PeakRun{Replicas: 1, Side: tokThrough}},
			func(c *peakCase) { c.Run.Total.AnsweredLong = 44 }, "long answered 44/60"},
		{"tokens: admitted", peakCase{Straight: tokStraight, Run: PeakRun{Replicas: 1, Side: tokThrough}},
			func(c *peakCase) { c.Run.TokensAdmitted = 84 }, "tokens admitted during the load 84 of 100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if f := failing(tc.c); len(f) > 0 {
				t.Fatalf("at the edges, failing: %q", f)
			}
			// A peak's result holding the run: as its one-sidecar run, or
			// beside one that meets its targets.
			r := &PeakResult{Straight: Side{Total: tc.c.Straight}, Through: Side{Total: tc.c.One},
				Scenario: Scenario{ClientTimeout: tc.c.ClientTimeout, Redis: tc.c.Redis}, More: []PeakRun{tc.c.Run}}
			if tc.c.Run.Replicas == 1 && tc.c.Run.Header == "" {
				r.More = nil
			} else if !tc.c.patient() {
				r.Through = Side{Total: impatient}
			}
			tc.mutate(&tc.c)
			f := failing(tc.c)
			if len(f) != 1 || !strings.HasPrefix(f[0], tc.want) {
				t.Fatalf("broken, failing %q; want only %q", f, tc.want)
			}
			if r.More == nil {
				r.Through = tc.c.Run.Side
			} else {
				r.More[0] = tc.c.Run
			}
			if p := r.Problems(); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("Problems() = %q, want one naming %q", p, tc.want)
			}
		})
	}
}

// TestMatrixResult: the table shows each check with PASS or FAIL, and the
// error (the exit status) is nil only when every check passed.
func TestMatrixResult(t *testing.T) {
	m := &MatrixResult{Rows: 2, Duration: 90 * time.Second, Checks: []Check{
		{Row: "capacity, 1 sidecar", Figure: "answered 600/600 (straight 189)", Target: "> straight", Pass: true},
		{Row: "retry storm, Gemini", Figure: "slowest answer 8.4s", Target: "≤ 5s", Pass: true},
	}}
	if err := m.Err(); err != nil {
		t.Errorf("every check passes: Err() = %v, want nil", err)
	}
	var out bytes.Buffer
	m.WriteTable(&out)
	for _, want := range []string{"row", "figure", "target", "result", "answered 600/600 (straight 189)", "> straight", "PASS", "✓ every check", "1m30s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	m.Checks[1].Pass = false
	err := m.Err()
	if err == nil || !strings.Contains(err.Error(), "1 of 2 checks failed, in retry storm, Gemini") {
		t.Errorf("one check fails: Err() = %v, want it counted and its row named", err)
	}
	out.Reset()
	m.WriteTable(&out)
	if !strings.Contains(out.String(), "FAIL") || !strings.Contains(out.String(), "✗ scenario matrix: 1 of 2") {
		t.Errorf("table does not show the failure:\n%s", out.String())
	}
	if err := (&MatrixResult{}).Err(); err == nil {
		t.Error("no check ran: Err() = nil, want an error")
	}
}

// TestMatrixRows: the full matrix has every row issue 39 lists; the short
// one is the CI subset.
func TestMatrixRows(t *testing.T) {
	names := func(rows []MatrixRow) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Name)
		}
		return out
	}
	full := names(MatrixRows(false))
	for _, want := range []string{
		"capacity, 1 sidecar", "capacity, 3 replicas", "capacity, 6 replicas", "capacity, 12 replicas",
		"drop, 1 sidecar", "drop, 3 replicas",
		"capacity, clients give up after 3s, 1 sidecar, no deadline header",
		"capacity, clients give up after 3s, 1 sidecar, X-Stainless-Timeout",
		"capacity, clients give up after 3s, 1 sidecar, X-Stainless-Read-Timeout",
		"capacity, clients give up after 3s, 3 replicas, no deadline header",
		"capacity, clients give up after 3s, 3 replicas, X-Stainless-Timeout",
		"capacity, clients give up after 3s, 6 replicas, no deadline header",
		"capacity, clients give up after 3s, 6 replicas, X-Stainless-Timeout",
		"capacity, clients give up after 10s, 1 sidecar, no deadline header",
		"capacity, clients give up after 10s, 6 replicas, X-Stainless-Timeout",
		"retry storm, OpenAI 429", "retry storm, Anthropic 529", "retry storm, Gemini 429 RetryInfo",
		"tokens, 1 sidecar", "tokens, 3 replicas",
		"capacity, 12 replicas sharing Redis",
		"capacity, clients give up after 3s, 3 replicas sharing Redis, no deadline header",
		"capacity, clients give up after 3s, 3 replicas sharing Redis, X-Stainless-Timeout",
		"capacity, clients give up after 3s, 6 replicas sharing Redis, no deadline header",
		"capacity, clients give up after 3s, 6 replicas sharing Redis, X-Stainless-Timeout",
	} {
		if !slices.Contains(full, want) {
			t.Errorf("full matrix lacks %q; rows %q", want, full)
		}
	}
	short := MatrixRows(true)
	if got := names(short); !slices.Equal(got, []string{"capacity (6s), 1 sidecar", "capacity (6s), 3 replicas",
		"retry storm, OpenAI 429", "retry storm, Anthropic 529", "retry storm, Gemini 429 RetryInfo"}) {
		t.Errorf("short rows %q", got)
	}
	if sc := short[0].Peak; sc.Duration != shortDuration || sc.Phases[len(sc.Phases)-1] != shortDuration || sc.Rate != Scenarios["capacity"].Rate {
		t.Errorf("short capacity %+v: want the full one's rate for %s", *sc, shortDuration)
	}
	drop := Scenarios["drop"].scaled(6 * time.Second)
	if drop.Steps[0].After != 2*time.Second || drop.Phases[1] != 4*time.Second || Scenarios["drop"].Steps[0].After != 5*time.Second {
		t.Errorf("drop scaled to 6s: steps %+v phases %v; the original must not change", drop.Steps, drop.Phases)
	}
}

// TestMatrixStorm runs a storm row through Matrix against a real sidecar
// and simulated model: with no refusal every prompt is answered at once,
// after one attempt, and the row passes; held to a target no answer can
// meet, the row fails and the matrix's error names it.
func TestMatrixStorm(t *testing.T) {
	for _, api := range []string{loadgen.APIOpenAI, loadgen.APIAnthropic, APIGemini} {
		t.Run(api, func(t *testing.T) {
			st := Storm{Name: "storm " + api, API: api, Prompts: 3, Refusals: 0, RetryAfter: time.Second,
				Latency: 10 * time.Millisecond, Within: 10 * time.Second, ClientTimeout: 20 * time.Second}
			impossible := st
			impossible.Name, impossible.Within = "impossible "+api, time.Nanosecond
			m, err := Matrix(t.Context(), []MatrixRow{{Name: st.Name, Storm: &st}, {Name: impossible.Name, Storm: &impossible}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			m.WriteTable(&out)
			if got, want := m.Failed(), []string{impossible.Name}; !slices.Equal(got, want) {
				t.Errorf("failed rows %q, want %q\n%s", got, want, out.String())
			}
			if err := m.Err(); err == nil || !strings.Contains(err.Error(), "1 of 6 checks failed") {
				t.Errorf("Err() = %v, want the one failed check\n%s", err, out.String())
			}
			for _, want := range []string{"answered 200: 3/3", "upstream attempts per prompt [1 1 1]"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestStormTargets evaluates a storm's targets on made-up prompts: four
// answered 200 within the target after exactly three attempts pass; each
// figure broken fails its target alone.
func TestStormTargets(t *testing.T) {
	st := Storms[0]
	good := func() *StormResult {
		r := &StormResult{Storm: st}
		for range st.Prompts {
			r.Prompts = append(r.Prompts, StormPrompt{Status: 200, Latency: st.Within, Attempts: st.Refusals + 1})
		}
		return r
	}
	if st.Prompts != 4 || st.Refusals != 2 || st.Within != 5*time.Second {
		t.Fatalf("storm %+v: want issue 39's four prompts refused twice, answered within 5s", st)
	}
	for _, tc := range []struct {
		name   string
		mutate func(p *StormPrompt)
		want   string
	}{
		{"refused", func(p *StormPrompt) { p.Status = 429 }, "answered 200: 3/4 (1 × 429)"},
		{"no answer", func(p *StormPrompt) { p.Status = 0 }, "answered 200: 3/4 (1 × no answer in 15s)"},
		{"late", func(p *StormPrompt) { p.Latency = st.Within + time.Millisecond }, "slowest answer 5.001s"},
		{"too few attempts", func(p *StormPrompt) { p.Attempts = 2 }, "upstream attempts per prompt [3 2 3 3]"},
		{"too many attempts", func(p *StormPrompt) { p.Attempts = 4 }, "upstream attempts per prompt [3 4 3 3]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			for _, c := range r.checks("storm") {
				if !c.Pass {
					t.Fatalf("at the edges, %q fails", c.Figure)
				}
			}
			tc.mutate(&r.Prompts[1])
			var failed []string
			for _, c := range r.checks("storm") {
				if !c.Pass {
					failed = append(failed, c.Figure)
				}
			}
			if len(failed) != 1 || failed[0] != tc.want {
				t.Errorf("failing %q, want only %q", failed, tc.want)
			}
		})
	}
}
