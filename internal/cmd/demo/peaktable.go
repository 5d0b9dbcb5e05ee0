package demo

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// WriteTable prints the scenario's per-phase counts, straight against through
// (and any fleet or client-deadline runs), and what they show.
func (r *PeakResult) WriteTable(w io.Writer) {
	sc := r.Scenario
	fmt.Fprintf(w, "\nscenario %q: model takes %d calls at once, %s per answer", sc.Name, sc.Capacity, sc.Latency)
	for _, st := range sc.Steps {
		fmt.Fprintf(w, "; %d at once from %s", st.Capacity, st.After)
	}
	fmt.Fprintf(w, "; load %.0f req/s for %s, every prompt distinct; Breakwater on default settings (deadline %s)", sc.Rate, sc.Duration, r.Deadline)
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
		fmt.Fprintf(w, "latency of answers %s: p50 %s p99 %s", s.Name, dur(s.P50), dur(s.P99))
		if len(s.PerReplica) > 0 {
			fmt.Fprintf(w, "; answers per replica %v", s.PerReplica)
		}
		fmt.Fprintln(w)
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

func pick(s Side, p int) Counts {
	if p < 0 {
		return s.Total
	}
	return s.Phases[p]
}

// Problems lists the targets this run misses. Every run through Breakwater:
// upstream 429s at most 25 % of straight's; no 5xx to the app; Retry-After on
// every 429 and 503; no answer past the deadline. Clients that wait: more
// answered than straight, and no other errors. A fleet: at least what
// straight answers and 90 % of what one sidecar answers, upstream calls at
// most 1.15 × the requests that reached the model, and the replica with the
// fewest answers at least 80 % of the one with the most. Impatient clients:
// with a deadline header at least what straight delivers, without one 90 %
// of it, and at most 10 % of the model's answers made for nobody.
func (r *PeakResult) Problems() []string {
	s := r.Straight.Total
	var out []string
	for _, run := range r.sides()[1:] {
		t := run.Total
		name := run.Name
		if 4*t.Upstream429 > s.Upstream429 {
			out = append(out, fmt.Sprintf("%s: upstream 429s %d, more than a quarter of straight's %d", name, t.Upstream429, s.Upstream429))
		}
		if t.ServerError > 0 {
			out = append(out, fmt.Sprintf("%s: %d 5xx reached the app", name, t.ServerError))
		}
		if t.NoRetryAfter > 0 {
			out = append(out, fmt.Sprintf("%s: %d 429/503 answers without Retry-After", name, t.NoRetryAfter))
		}
		if t.PastDeadline > 0 {
			out = append(out, fmt.Sprintf("%s: %d answers past the deadline", name, t.PastDeadline))
		}
		if r.Scenario.ClientTimeout > 0 {
			want := s.Answered
			if run.Header == "" {
				want = (9*s.Answered + 9) / 10
			}
			if t.Answered < want {
				out = append(out, fmt.Sprintf("%s: delivered %d, want at least %d (straight %d)", name, t.Answered, want, s.Answered))
			}
			if made := t.Upstream - t.Upstream429; 10*t.Abandoned > made {
				out = append(out, fmt.Sprintf("%s: %d of the model's %d answers made for nobody, more than 10 %%", name, t.Abandoned, made))
			}
			continue
		}
		if t.Other > 0 {
			out = append(out, fmt.Sprintf("%s: %d other errors", name, t.Other))
		}
		if run.Replicas <= 1 {
			if t.Answered <= s.Answered {
				out = append(out, fmt.Sprintf("%s answered %d, straight %d", name, t.Answered, s.Answered))
			}
			continue
		}
		one := r.Through.Total.Answered
		if t.Answered < s.Answered || 10*t.Answered < 9*one {
			out = append(out, fmt.Sprintf("%s answered %d, want at least straight's %d and 90 %% of one sidecar's %d", name, t.Answered, s.Answered, one))
		}
		if 100*t.Upstream > 115*t.Reached {
			out = append(out, fmt.Sprintf("%s: %d upstream calls for %d requests that reached the model, more than 1.15×", name, t.Upstream, t.Reached))
		}
		if len(run.PerReplica) > 0 {
			lo, hi := slices.Min(run.PerReplica), slices.Max(run.PerReplica)
			if 5*lo < 4*hi {
				out = append(out, fmt.Sprintf("%s: answers per replica from %d to %d, the fewest under 80 %% of the most", name, lo, hi))
			}
		}
	}
	return out
}
