package demo

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
)

// WriteTable prints the side-by-side and what it shows.
func (r *Result) WriteTable(w io.Writer) {
	o := r.Options
	d, b := r.Direct, r.Breakwater
	kinds := d.Bench.ByKind
	n := d.Bench.Scheduled
	fmt.Fprintf(w, "\nsimulated model: %d in flight at most, %s–%s per answer (~%.0f answers/s); load: %.0f req/s for %s (%.1f× what the model can answer)\n",
		o.Capacity, o.Latency, o.Latency+2*o.Jitter, r.Throughput, o.Rate, o.Duration, o.Rate/r.Throughput)
	fmt.Fprintf(w, "workload: %d requests: %d new, %d exact repeats (%.0f%%), %d paraphrases (%.0f%%), Zipf %.2g, seed %d\n\n",
		n, kinds[loadgen.KindNew].Count, kinds[loadgen.KindRepeat].Count, share(kinds[loadgen.KindRepeat].Count, n),
		kinds[loadgen.KindParaphrase].Count, share(kinds[loadgen.KindParaphrase].Count, n), o.Mix.Zipf, o.Mix.Seed)

	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "\t%s\t%s\n", d.Name, b.Name)
	row := func(label string, f func(p Phase) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, f(d), f(b))
	}
	row("successful answers", func(p Phase) string {
		return fmt.Sprintf("%d / %d (%.0f%%)", p.Bench.OK, p.Bench.Scheduled, share(p.Bench.OK, p.Bench.Scheduled))
	})
	refusal := "429"
	if o.API == loadgen.APIAnthropic {
		refusal = "529"
		row("529s (overloaded) seen by the app", func(p Phase) string { return fmt.Sprint(p.Bench.Overloaded) })
		row("streams cut mid-answer", func(p Phase) string { return fmt.Sprint(p.Bench.StreamErrors) })
	}
	row("429s seen by the app", func(p Phase) string { return fmt.Sprint(p.Bench.RateLimited) })
	row("other errors", func(p Phase) string { return fmt.Sprint(otherErrors(p.Bench)) })
	row("upstream calls (model)", func(p Phase) string {
		if p.Name == d.Name || d.Model.Calls == 0 {
			return fmt.Sprint(p.Model.Calls)
		}
		return fmt.Sprintf("%d (%+.0f%%)", p.Model.Calls, 100*(float64(p.Model.Calls)/float64(d.Model.Calls)-1))
	})
	row("  of them judge prompts", func(p Phase) string { return fmt.Sprint(p.Model.Judged) })
	row("  refused by the model ("+refusal+")", func(p Phase) string { return fmt.Sprint(p.Model.RateLimited) })
	row("  peak in flight at the model", func(p Phase) string { return fmt.Sprint(p.Model.InFlightPeak) })
	row("answered from the cache", func(p Phase) string {
		bo := p.Bench.ByOutcome
		if p.Bench.UpstreamSaved == 0 {
			return "0"
		}
		return fmt.Sprintf("%d (exact %d, semantic %d)", p.Bench.UpstreamSaved, bo[loadgen.OutcomeHitExact].OK, bo[loadgen.OutcomeHitSemantic].OK)
	})
	row("latency p50 (answers)", func(p Phase) string { return dur(p.Bench.Latency.P50) })
	row("latency p99 (answers)", func(p Phase) string { return dur(p.Bench.Latency.P99) })
	tw.Flush()

	fmt.Fprintln(w)
	if b.Bench.Latency.P50 > d.Bench.Latency.P50 {
		fmt.Fprintf(w, "latency: %s's answers include misses that waited in its queue for a slot at the model instead of getting a %s at once; %s's latency counts only the requests the model took.\n\n", b.Name, refusal, d.Name)
	}
	for _, line := range r.Findings() {
		fmt.Fprintln(w, line)
	}
}

// Findings states the demo's claims and whether this run bears them out.
func (r *Result) Findings() []string {
	d, b := r.Direct, r.Breakwater
	var out []string
	if shed := b.Bench.RateLimited; shed == 0 {
		out = append(out, "✓ Breakwater's 429s to the app: 0 — it found the model's capacity at run time and queued the misses instead of passing refusals on.")
	} else {
		out = append(out, fmt.Sprintf("✗ Breakwater shed %d requests with 429: its queue for the model was full (upstreams.max_queue) or a wait would not fit retry.deadline; raise them or lower the load.", shed))
	}
	if r.Options.API == loadgen.APIAnthropic {
		if b.Bench.Overloaded == 0 && b.Bench.StreamErrors == 0 {
			out = append(out, fmt.Sprintf("✓ 529s and cut streams seen by the app: 0 through Breakwater (straight to the model: %d and %d) — refusals were queued and retried, cut streams resumed.", d.Bench.Overloaded, d.Bench.StreamErrors))
		} else {
			out = append(out, fmt.Sprintf("✗ through Breakwater the app still saw %d 529s and %d cut streams.", b.Bench.Overloaded, b.Bench.StreamErrors))
		}
	}
	if e := otherErrors(b.Bench); e > 0 {
		out = append(out, fmt.Sprintf("✗ %d other errors through Breakwater (timeouts or 5xx): the queue wait outgrew the deadline; lower -rate or raise -capacity.", e))
	}
	repeat := share(d.Bench.ByKind[loadgen.KindRepeat].Count, d.Bench.Scheduled)
	if d.Model.Calls > 0 {
		// The model's answers through Breakwater against its calls straight (a
		// cut stream's call is left out: it answered nothing; the judge's
		// verdicts, a few tokens each, are not answers).
		drop := 100 * (1 - float64(b.Model.OK-b.Model.Judged)/float64(d.Model.Calls-d.Model.Errors))
		mark := "✓"
		if drop < repeat {
			mark = "✗"
		}
		out = append(out, fmt.Sprintf("%s model answers needed −%.0f%% (the workload repeats %.0f%% of its questions word for word).", mark, drop, repeat))
	}
	return out
}

// Problems lists the demo's invariants that this run breaks (for tests and
// scripts): Breakwater's 429s to the app at 0, and fewer upstream calls than
// direct by at least the repeat share.
func (r *Result) Problems() []string {
	d, b := r.Direct, r.Breakwater
	var out []string
	if b.Bench.RateLimited != 0 {
		out = append(out, fmt.Sprintf("breakwater returned %d 429s", b.Bench.RateLimited))
	}
	if b.Bench.Overloaded != 0 || b.Bench.StreamErrors != 0 {
		out = append(out, fmt.Sprintf("breakwater returned %d 529s and %d cut streams", b.Bench.Overloaded, b.Bench.StreamErrors))
	}
	if b.Bench.OK != b.Bench.Scheduled {
		out = append(out, fmt.Sprintf("breakwater answered %d of %d", b.Bench.OK, b.Bench.Scheduled))
	}
	// The model's answers through Breakwater (its refusals while the limit
	// probes for capacity are not work saved or spent).
	repeats := d.Bench.ByKind[loadgen.KindRepeat].Count
	dc := d.Model.Calls - d.Model.Errors // cut calls left out, as in Findings
	// The judge's verdicts (a few tokens each) are not answers.
	answers := b.Model.OK - b.Model.Judged
	if saved := dc - answers; float64(saved) < float64(repeats)/float64(d.Bench.Scheduled)*float64(dc) {
		out = append(out, fmt.Sprintf("model answers %d → %d: fewer saved than the %d repeats", dc, answers, repeats))
	}
	return out
}

func otherErrors(s *loadgen.Summary) int {
	return s.ServerErrors + s.ClientErrors + s.Errors + s.Dropped
}

func share(a, n int) float64 {
	if n == 0 {
		return 0
	}
	return 100 * float64(a) / float64(n)
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}
