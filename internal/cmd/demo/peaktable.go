package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the scenario's per-phase counts, straight against through
// (and any fleet or client-deadline runs), and what they show.
func (r *PeakResult) WriteTable(w io.Writer) {
	sc := r.Scenario
	if t := sc.Tokens; t != nil {
		fmt.Fprintf(w, "\nscenario %q: model limited by %d tokens per minute only (its bucket holds %s of it), %s per answer; load %.1f req/s for %s (%.0f tokens/s, %.1f× the budget), every %s request long (%d tokens: %d in, max_tokens %d), the others short (%d: %d in, max_tokens %d), every prompt distinct",
			sc.Name, t.TPM, t.Burst, sc.Latency, sc.Rate, sc.Duration, sc.Rate*t.meanCost(), sc.Rate*t.meanCost()/(float64(t.TPM)/60),
			ordinal(t.LongEvery), t.Long.Cost(), t.Long.Input, t.Long.MaxTokens, t.Short.Cost(), t.Short.Input, t.Short.MaxTokens)
	} else {
		fmt.Fprintf(w, "\nscenario %q: model takes %d calls at once, %s per answer", sc.Name, sc.Capacity, sc.Latency)
	}
	for _, st := range sc.Steps {
		fmt.Fprintf(w, "; %d at once from %s", st.Capacity, st.After)
	}
	if sc.Tokens == nil {
		fmt.Fprintf(w, "; load %.0f req/s for %s, every prompt distinct", sc.Rate, sc.Duration)
	}
	fmt.Fprintf(w, "; Breakwater on default settings (deadline %s)", r.Deadline)
	if sc.Redis && sc.Replicas > 1 {
		fmt.Fprint(w, "; the replicas share Redis")
	}
	if sc.ClientTimeout > 0 {
		fmt.Fprintf(w, "; every client gives up after %s", sc.ClientTimeout)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	sides := r.sides()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tside\tsent\tanswered\t429 to app\t5xx to app\tother\tno Retry-After\tpast deadline\tupstream calls\tupstream 429s\tfor nobody\t")
	rows := func(p int) {
		for _, s := range sides {
			c := pick(s.Side, p)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", c.Phase, s.Name, c.Sent, c.Answered,
				c.RateLimited, c.ServerError, c.Other, c.NoRetryAfter, c.PastDeadline, c.Upstream, c.Upstream429, c.Abandoned)
		}
	}
	if len(sides) == 2 {
		for p := range r.Straight.Phases {
			rows(p)
		}
	}
	rows(-1)
	tw.Flush()
	fmt.Fprintln(w)
	for _, s := range sides {
		fmt.Fprintf(w, "latency of answers %s: p50 %s p99 %s; upstream 429s in the first %s %d", s.Name, dur(s.P50), dur(s.P99), earlyWindow, s.Early429)
		if len(s.PerReplica) > 0 {
			fmt.Fprintf(w, "; answers per replica %v", s.PerReplica)
		}
		fmt.Fprintln(w)
	}
	if sc.Tokens != nil {
		for _, s := range sides {
			t := s.Total
			fmt.Fprintf(w, "tokens %s: answered %d/%d (%.0f %%), upstream 429s %d; long answered %d/%d, short %d/%d, long/short %.2f; tokens admitted during the load %d of a budget of %d (%.0f %%)\n",
				s.Name, t.Answered, t.Sent, pct(t.Answered, t.Sent), t.Upstream429, t.AnsweredLong, t.SentLong,
				t.Answered-t.AnsweredLong, t.Sent-t.SentLong, t.longRatio(), s.TokensAdmitted, s.TokenBudget, pct(int(s.TokensAdmitted), int(s.TokenBudget)))
		}
	}
	fmt.Fprint(w, peakLegend)
	for _, p := range r.Problems() {
		fmt.Fprintln(w, "✗ "+p)
	}
	if len(r.Problems()) == 0 {
		fmt.Fprintln(w, "✓ every run through Breakwater meets its targets: answers, at most a quarter of straight's upstream 429s, no 5xx, Retry-After on every 429/503, nothing past the deadline.")
	}
}

// peakLegend says how to read the table: what the rows are, and why the
// answers through Breakwater take longer.
const peakLegend = `
how to read it: one row per way of sending the load and phase of it ("straight": the
app calls the model directly; "through": via one Breakwater; "N replicas": via N
sidecars sharing nothing; a header name: clients stating their timeout in it), then
the whole run. "drain" is after the load stopped: requests sent during the peak that
were still waiting (in Breakwater's queue, or at the model) and were answered then.
"for nobody" counts the model's answers whose client had gone (a provider bills them).
Answers through Breakwater are slower because it queues a request the model
has no room for until a slot frees, within the deadline, where straight gets a
429 in milliseconds; straight's latency counts only the requests the model
took at once, so it answers fewer, faster.
`

// sides lists the runs in table order: straight, through one sidecar, then
// the others.
func (r *PeakResult) sides() []PeakRun {
	through := "through"
	if r.Scenario.ClientTimeout > 0 {
		through = "no header"
	}
	out := []PeakRun{{Name: "straight", Side: r.Straight}, {Name: through, Replicas: 1, Side: r.Through}}
	return append(out, r.More...)
}

// pct is n as a percentage of of, 0 when of is.
func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// ordinal writes n as "5th" (n > 3 in the demo's mixes) or "other".
func ordinal(n int) string {
	if n == 2 {
		return "other"
	}
	return fmt.Sprintf("%dth", n)
}

func pick(s Side, p int) Counts {
	if p < 0 {
		return s.Total
	}
	return s.Phases[p]
}

// Problems lists the targets (peakTargets) this run misses, one line each.
func (r *PeakResult) Problems() []string {
	var out []string
	for _, run := range r.sides()[1:] {
		c := peakCase{Straight: r.Straight.Total, One: r.Through.Total, Run: run, ClientTimeout: r.Scenario.ClientTimeout, Redis: r.Scenario.Redis}
		for _, ch := range c.checks(run.Name) {
			if !ch.Pass {
				out = append(out, fmt.Sprintf("%s: %s, want %s", ch.Row, ch.Figure, ch.Target))
			}
		}
	}
	return out
}
