package demo

import (
	"bytes"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// The token scenario's requests cost what issue 37 sets (200 tokens short,
// 5,000 long, one in five long) as the simulated model charges them, and
// its load offers 3× the model's budget.
func TestTokenRequestsCost(t *testing.T) {
	sc := Scenarios["tokens"]
	tl := sc.Tokens
	if tl.Short.Cost() != 200 || tl.Long.Cost() != 5000 || tl.LongEvery != 5 {
		t.Errorf("mix %+v: want 200-token short, 5,000-token long, every 5th long", *tl)
	}
	if offered := sc.Rate * tl.meanCost() * 60; math.Abs(offered/float64(tl.TPM)-3) > 1e-9 {
		t.Errorf("offered %.0f tokens a minute to a budget of %d, want 3×", offered, tl.TPM)
	}
	m := sim.New(sim.Options{TPM: 1 << 30})
	srv := httptest.NewServer(m)
	defer srv.Close()
	client := &http.Client{}
	var before int64
	for i := range 10 {
		body, long := requestBody(sc, i)
		if want := i%5 == 4; long != want {
			t.Errorf("request %d long = %v, want %v", i, long, want)
		}
		o := ask(t.Context(), client, srv.URL, body, 10*time.Second, "")
		if o.status != http.StatusOK {
			t.Fatalf("request %d: status %d", i, o.status)
		}
		want := tl.Short.Cost()
		if long {
			want = tl.Long.Cost()
		}
		after := m.Stats().TokensAdmitted
		if got := int(after - before); got != want {
			t.Errorf("request %d (long %v) charged %d tokens, want %d", i, long, got, want)
		}
		before = after
	}
}

// A short token-limited load straight at the model: the model refuses on
// tokens, the run counts long requests apart and measures the tokens
// admitted during the load against the budget, and the table reports them.
func TestPeakTokensStraight(t *testing.T) {
	tl := TokenLoad{TPM: 60000, Burst: 2 * time.Second, LongEvery: 5,
		Short: RequestSize{Input: 50, MaxTokens: 50}, Long: RequestSize{Input: 500, MaxTokens: 1000}}
	sc := Scenario{Name: "short tokens", Latency: 20 * time.Millisecond, Rate: tl.tokenRate(3),
		Duration: 2 * time.Second, Phases: []time.Duration{2 * time.Second}, Tokens: &tl}
	side, err := runStraight(t.Context(), sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	tot := side.Total
	if tot.Sent == 0 || tot.SentLong != tot.Sent/5 {
		t.Errorf("sent %d, %d long; want one in five long", tot.Sent, tot.SentLong)
	}
	if tot.Upstream429 == 0 || tot.Answered == tot.Sent {
		t.Errorf("answered %d of %d with %d upstream 429s: the load did not exceed the budget", tot.Answered, tot.Sent, tot.Upstream429)
	}
	// 4,000 tokens of budget (2 s of 60,000 a minute, and the bucket of 2 s
	// full at the start); a snapshot taken a little late may see a little
	// more.
	if side.TokenBudget != 4000 || side.TokensAdmitted <= 0 || side.TokensAdmitted > 4400 {
		t.Errorf("tokens admitted %d of a budget %d, want a budget of 4000 and at most ~4400 admitted", side.TokensAdmitted, side.TokenBudget)
	}
	r := &PeakResult{Scenario: sc, Straight: side, Through: side}
	var out bytes.Buffer
	r.WriteTable(&out)
	for _, want := range []string{"limited by 60000 tokens per minute only", "tokens straight: answered", "long/short", "tokens admitted during the load"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
