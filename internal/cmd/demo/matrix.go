package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

// MatrixRow is one row of the scenario matrix: a peak scenario sent
// through Replicas sidecars (its clients stating their timeout in Header,
// if any), or a retry storm.
type MatrixRow struct {
	Name     string    `json:"name"`
	Peak     *Scenario `json:"peak,omitempty"`
	Replicas int       `json:"replicas,omitempty"`
	Header   string    `json:"header,omitempty"`
	Storm    *Storm    `json:"storm,omitempty"`
}

// shortDuration is the load's length in the short matrix: enough for the
// sidecar to find the model's capacity and hold it, a third of the full
// 15 s (a through run also drains what it queued).
const shortDuration = 6 * time.Second

// MatrixRows are the rows of issue 39's scenario matrix, every peak
// scenario of the demo with its targets:
//   - the capacity peak through one sidecar and through 3, 6 and 12
//     replicas, and the capacity drop through one sidecar and 3 replicas
//     (issue 25);
//   - clients giving up after 3 s and 10 s, stating it in a deadline header
//     or not, through one sidecar and through 6 replicas (issue 30, and
//     issue 25's fleet);
//   - each API's retry storm (Storms);
//   - the token-limited peak through one sidecar and 3 replicas (issue 37,
//     tokenRows).
//
// Short is the CI subset, a few minutes on 2 cores: the capacity peak cut
// to shortDuration through one sidecar and 3 replicas, and the three
// storms (not the token peak: its load and drain take about 90 s a run).
func MatrixRows(short bool) []MatrixRow {
	var rows []MatrixRow
	capacity, drop := Scenarios["capacity"], Scenarios["drop"]
	if short {
		capacity = capacity.scaled(shortDuration)
		rows = append(rows, peakRow(capacity, 1, ""), peakRow(capacity, 3, ""))
	} else {
		for _, n := range []int{1, 3, 6, 12} {
			rows = append(rows, peakRow(capacity, n, ""))
		}
		rows = append(rows, peakRow(drop, 1, ""), peakRow(drop, 3, ""))
		for _, t := range []time.Duration{3 * time.Second, 10 * time.Second} {
			sc := capacity
			sc.ClientTimeout = t
			for _, h := range append([]string{""}, deadlineHeaders...) {
				rows = append(rows, peakRow(sc, 1, h))
			}
			if t == 3*time.Second {
				// Issue 38: 3 and 6 replicas without a shared store, header
				// or not, ≥ 0.9× straight.
				rows = append(rows, peakRow(sc, 3, ""), peakRow(sc, 3, deadlineHeaders[0]))
			}
			rows = append(rows, peakRow(sc, 6, ""), peakRow(sc, 6, deadlineHeaders[0]))
		}
		rows = append(rows, redisRows(capacity)...)
	}
	for _, st := range Storms {
		rows = append(rows, MatrixRow{Name: st.Name, Storm: &st})
	}
	return append(rows, tokenRows(short)...)
}

// tokenRows are the token-limited peak's rows (issue 39: "the token
// scenario once it exists"; issue 37's "Must show"): through one sidecar
// and through 3 replicas, held to peakTargets' tokenLimited targets. The
// short matrix has none: a run is 30 s of load and up to a minute of
// drain, three runs a row.
func tokenRows(short bool) []MatrixRow {
	if short {
		return nil
	}
	sc := Scenarios["tokens"]
	return []MatrixRow{peakRow(sc, 1, ""), peakRow(sc, 3, "")}
}

// redisRows are the fleet sharing one capacity estimate through Redis
// (issue 38, "Cold start"): the capacity peak through 12 replicas, and
// through 3 and 6 replicas whose clients give up after 3 s, with and
// without a deadline header. Not in the short matrix: each starts a
// redis-server (fleet/redistest).
func redisRows(capacity Scenario) []MatrixRow {
	capacity.Redis = true
	rows := []MatrixRow{peakRow(capacity, 12, "")}
	capacity.ClientTimeout = 3 * time.Second
	for _, n := range []int{3, 6} {
		rows = append(rows, peakRow(capacity, n, ""), peakRow(capacity, n, deadlineHeaders[0]))
	}
	return rows
}

// peakRow is sc through replicas sidecars, clients sending header.
func peakRow(sc Scenario, replicas int, header string) MatrixRow {
	name := sc.Name
	if sc.ClientTimeout > 0 {
		name += fmt.Sprintf(", clients give up after %s", sc.ClientTimeout)
	}
	if replicas == 1 {
		name += ", 1 sidecar"
	} else {
		name += fmt.Sprintf(", %d replicas", replicas)
	}
	if sc.Redis && replicas > 1 {
		name += " sharing Redis"
	}
	if sc.ClientTimeout > 0 {
		if header == "" {
			name += ", no deadline header"
		} else {
			name += ", " + header
		}
	}
	return MatrixRow{Name: name, Peak: &sc, Replicas: replicas, Header: header}
}

// scaled is sc with its load cut to d, its phases in proportion.
func (sc Scenario) scaled(d time.Duration) Scenario {
	f := float64(d) / float64(sc.Duration)
	phases := make([]time.Duration, len(sc.Phases))
	for i, p := range sc.Phases {
		phases[i] = time.Duration(float64(p) * f)
	}
	steps := make([]sim.Step, 0, len(sc.Steps))
	for _, st := range sc.Steps {
		st.After = time.Duration(float64(st.After) * f)
		steps = append(steps, st)
	}
	sc.Duration, sc.Phases = d, phases
	if len(steps) > 0 {
		sc.Steps = steps
	}
	sc.Name += fmt.Sprintf(" (%s)", d)
	return sc
}

// MatrixResult is the matrix's table: every check of every row.
type MatrixResult struct {
	Short    bool          `json:"short"`
	Rows     int           `json:"rows"`
	Checks   []Check       `json:"checks"`
	Duration time.Duration `json:"duration"`
}

// Matrix runs rows one after another, each against fresh simulated models
// and fresh sidecars on default settings, and evaluates each against its
// targets (peakTargets, stormTargets). The straight run a peak row is
// measured against is run once per scenario (and client timeout); so is the
// one-sidecar run a fleet row is held to.
func Matrix(ctx context.Context, rows []MatrixRow, logger *slog.Logger, status io.Writer) (*MatrixResult, error) {
	start := time.Now()
	res := &MatrixResult{Rows: len(rows)}
	straight, one := map[string]Side{}, map[string]Side{}
	for i, row := range rows {
		statusf(status, "matrix row %d/%d: %s", i+1, len(rows), row.Name)
		if row.Storm != nil {
			r, err := RunStorm(ctx, *row.Storm, logger, status)
			if err != nil {
				return nil, fmt.Errorf("matrix row %q: %w", row.Name, err)
			}
			res.Checks = append(res.Checks, r.checks(row.Name)...)
			continue
		}
		sc := *row.Peak
		key := fmt.Sprintf("%s|%s", sc.Name, sc.ClientTimeout)
		var err error
		s, ok := straight[key]
		if !ok {
			if s, err = runStraight(ctx, sc, status); err != nil {
				return nil, fmt.Errorf("matrix row %q: %w", row.Name, err)
			}
			straight[key] = s
		}
		c := peakCase{Straight: s.Total, ClientTimeout: sc.ClientTimeout, Redis: sc.Redis,
			Run: PeakRun{Name: row.Name, Replicas: row.Replicas, Header: row.Header}}
		if c.Run.Side, err = runThrough(ctx, sc, row.Replicas, row.Header, logger, status); err != nil {
			return nil, fmt.Errorf("matrix row %q: %w", row.Name, err)
		}
		switch {
		case !c.patient():
		case !c.fleet():
			one[key] = c.Run.Side
		default:
			ref, ok := one[key]
			if !ok {
				if ref, err = runThrough(ctx, sc, 1, "", logger, status); err != nil {
					return nil, fmt.Errorf("matrix row %q: %w", row.Name, err)
				}
				one[key] = ref
			}
			c.One = ref.Total
		}
		res.Checks = append(res.Checks, c.checks(row.Name)...)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// Failed lists the rows with a failed check, in order.
func (m *MatrixResult) Failed() []string {
	var out []string
	for _, c := range m.Checks {
		if !c.Pass && (len(out) == 0 || out[len(out)-1] != c.Row) {
			out = append(out, c.Row)
		}
	}
	return out
}

// Err is nil when every check passed, else says how many failed and where.
func (m *MatrixResult) Err() error {
	failed := 0
	for _, c := range m.Checks {
		if !c.Pass {
			failed++
		}
	}
	if failed == 0 && len(m.Checks) > 0 {
		return nil
	}
	if len(m.Checks) == 0 {
		return fmt.Errorf("scenario matrix: no check ran")
	}
	return fmt.Errorf("scenario matrix: %d of %d checks failed, in %s", failed, len(m.Checks), strings.Join(m.Failed(), "; "))
}

// WriteTable prints one line per check: the row, the figure measured, the
// target and PASS or FAIL; then the verdict and how long the matrix took.
func (m *MatrixResult) WriteTable(w io.Writer) {
	what := "full"
	if m.Short {
		what = "short"
	}
	fmt.Fprintf(w, "\nscenario matrix (%s): %d rows, Breakwater on default settings\n\n", what, m.Rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tfigure\ttarget\tresult")
	for _, c := range m.Checks {
		result := "PASS"
		if !c.Pass {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Row, c.Figure, c.Target, result)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if err := m.Err(); err != nil {
		fmt.Fprintf(w, "✗ %s (took %s)\n", err, m.Duration.Round(time.Second))
		return
	}
	fmt.Fprintf(w, "✓ every check of every row passes: %d checks (took %s)\n", len(m.Checks), m.Duration.Round(time.Second))
}
