package evalcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func writeText(w io.Writer, rep Report) error {
	fmt.Fprintf(w, "pairs %d (%d duplicate, %d not), skipped %d; split %s; embedder %s; guard rules off: %s; %.0f s\n",
		rep.Pairs, rep.Duplicates, rep.NonDuplicates, rep.Skipped, rep.Split, rep.Embedder, orNone(rep.DisabledRules), rep.Seconds)
	fmt.Fprintln(w, "hit: score >= threshold; precision = correct hits / hits; recall = correct hits / duplicates;")
	fmt.Fprintln(w, "false-hit rate = wrong hits / hits; false/non-dup = wrong hits / non-duplicate pairs; [95 % Wilson interval]")
	for _, t := range []struct {
		title string
		rows  []Row
	}{{"without guard", rep.WithoutGuard}, {"with guard", rep.WithGuard}} {
		fmt.Fprintf(w, "\n%s\n", t.title)
		writeRows(w, t.rows)
	}
	fmt.Fprintf(w, "\nguard rejections among pairs scoring >= %.2f (duplicate / not duplicate)\n", rep.RejectionsAt)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reason\tduplicate\tnot duplicate\t")
	for _, r := range rep.Rejections {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", r.Reason, r.Duplicate, r.NonDuplicate)
	}
	return tw.Flush()
}

func writeRows(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "threshold\thits\tprecision\trecall\tfalse-hit rate\tfalse/non-dup\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%.2f\t%d\t%s\t%s\t%s\t%s\t\n", r.Threshold, r.Hits,
			ci(r.Precision), ci(r.Recall), ci(r.FalseHitRate), ci(r.FalsePerNonDuplicate))
	}
	tw.Flush()
}

func ci(i Interval) string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", i.Value, i.Low, i.High)
}

func writeCalibration(w io.Writer, c Calibration, rep Report) {
	guard := "on"
	if !c.Guard {
		guard = "off"
	}
	if !c.Found {
		fmt.Fprintf(w, "# no threshold keeps the false-hit rate <= %v (95 %% upper bound); guard %s, %d pairs\n", c.Target, guard, rep.Pairs)
		return
	}
	r := c.Row
	fmt.Fprintf(w, "# calibrated on %d pairs (%d duplicate, split %s), embedder %s, guard %s (rules off: %s)\n",
		rep.Pairs, rep.Duplicates, rep.Split, rep.Embedder, guard, orNone(rep.DisabledRules))
	fmt.Fprintf(w, "# hits %d, false-hit rate %s <= %v, precision %s, recall %s\n",
		r.Hits, ci(r.FalseHitRate), c.Target, ci(r.Precision), ci(r.Recall))
	fmt.Fprintf(w, "threshold = %.2f\n", r.Threshold)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
