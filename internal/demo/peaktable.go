package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable prints the scenario's per-phase counts, straight against through,
// and what they show.
func (r *PeakResult) WriteTable(w io.Writer) {
	sc := r.Scenario
	fmt.Fprintf(w, "\nscenario %q: model takes %d calls at once, %s per answer", sc.Name, sc.Capacity, sc.Latency)
	for _, st := range sc.Steps {
		fmt.Fprintf(w, "; %d at once from %s", st.Capacity, st.After)
	}
	fmt.Fprintf(w, "; load %.0f req/s for %s, every prompt distinct; Breakwater on default settings (deadline %s)\n\n", sc.Rate, sc.Duration, r.Deadline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tside\tsent\tanswered\t429 to app\t5xx to app\tother\tno Retry-After\tpast deadline\tupstream calls\tupstream 429s\t")
	rows := func(p int) {
		for _, s := range []struct {
			name string
			c    Counts
		}{{"straight", pick(r.Straight, p)}, {"through", pick(r.Through, p)}} {
			c := s.c
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", c.Phase, s.name, c.Sent, c.Answered,
				c.RateLimited, c.ServerError, c.Other, c.NoRetryAfter, c.PastDeadline, c.Upstream, c.Upstream429)
		}
	}
	for p := range r.Straight.Phases {
		rows(p)
	}
	rows(-1)
	tw.Flush()
	fmt.Fprintf(w, "\nlatency of answers: straight p50 %s p99 %s; through p50 %s p99 %s\n",
		dur(r.Straight.P50), dur(r.Straight.P99), dur(r.Through.P50), dur(r.Through.P99))
	fmt.Fprint(w, peakLegend)
	for _, p := range r.Problems() {
		fmt.Fprintln(w, "✗ "+p)
	}
	if len(r.Problems()) == 0 {
		fmt.Fprintln(w, "✓ through answers more than straight, with at most a quarter of its upstream 429s, no 5xx, Retry-After on every 429/503 and nothing past the deadline.")
	}
}

// peakLegend says how to read the table: what the rows are, and why the
// answers through Breakwater take longer.
const peakLegend = `
how to read it: one pair of rows per phase of the load ("straight": the app
calls the model directly; "through": via Breakwater), then the whole run.
"drain" is after the load stopped: requests sent during the peak that were
still waiting (in Breakwater's queue, or at the model) and were answered then.
Answers through Breakwater are slower because it queues a request the model
has no room for until a slot frees, within the deadline, where straight gets a
429 in milliseconds; straight's latency counts only the requests the model
took at once, so it answers fewer, faster.
`

func pick(s Side, p int) Counts {
	if p < 0 {
		return s.Total
	}
	return s.Phases[p]
}

// Problems lists the targets this run misses: through answers more than
// straight; upstream 429s at most 25 % of straight's; no 5xx to the app;
// Retry-After on every 429 and 503; no answer past the deadline.
func (r *PeakResult) Problems() []string {
	s, t := r.Straight.Total, r.Through.Total
	var out []string
	if t.Answered <= s.Answered {
		out = append(out, fmt.Sprintf("through answered %d, straight %d", t.Answered, s.Answered))
	}
	if 4*t.Upstream429 > s.Upstream429 {
		out = append(out, fmt.Sprintf("upstream 429s through %d, more than a quarter of straight's %d", t.Upstream429, s.Upstream429))
	}
	if t.ServerError > 0 {
		out = append(out, fmt.Sprintf("%d 5xx reached the app through Breakwater", t.ServerError))
	}
	if t.NoRetryAfter > 0 {
		out = append(out, fmt.Sprintf("%d 429/503 answers without Retry-After", t.NoRetryAfter))
	}
	if t.PastDeadline > 0 || t.Other > 0 {
		out = append(out, fmt.Sprintf("%d answers past the deadline, %d other errors", t.PastDeadline, t.Other))
	}
	return out
}
