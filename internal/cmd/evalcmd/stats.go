package evalcmd

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/breakwater-dev/breakwater/cache/verify"
)

// Interval is a proportion with its 95 % Wilson score interval: the one
// the live estimate reports (verify.Interval), so eval and /stats agree.
type Interval = verify.Interval

// Wilson returns k/n with its 95 % Wilson score interval (verify.Wilson);
// n <= 0 gives 0 within [0, 1]: nothing is known.
func Wilson(k, n int) Interval {
	return verify.Wilson(uint64(max(k, 0)), uint64(max(n, 0)))
}

// Row is what the semantic tier serves at one threshold.
type Row struct {
	Threshold float64 `json:"threshold"`
	// Hits are pairs served from the cache: score >= threshold (and the guard
	// accepts, in the guarded table). Correct hits are hits on duplicates.
	Hits    int `json:"hits"`
	Correct int `json:"correct"`
	// Precision = Correct / Hits.
	Precision Interval `json:"precision"`
	// Recall = Correct / all duplicate pairs.
	Recall Interval `json:"recall"`
	// FalseHitRate = (Hits - Correct) / Hits: the share of served answers
	// that answer another question. It is 1 - Precision.
	FalseHitRate Interval `json:"false_hit_rate"`
	// FalsePerNonDuplicate = (Hits - Correct) / all non-duplicate pairs: how
	// often a near-miss question gets a wrong answer.
	FalsePerNonDuplicate Interval `json:"false_hits_per_non_duplicate"`
}

// Table computes one Row per threshold. guarded counts only hits the guard
// accepts.
func Table(out []Outcome, thresholds []float64, guarded bool) []Row {
	dups, nondups := 0, 0
	for _, o := range out {
		if o.Duplicate {
			dups++
		} else {
			nondups++
		}
	}
	rows := make([]Row, 0, len(thresholds))
	for _, t := range thresholds {
		tt := float32(t) // the index compares float32 scores with a float32 threshold
		hits, correct := 0, 0
		for _, o := range out {
			if o.Score < tt || (guarded && !o.GuardOK) {
				continue
			}
			hits++
			if o.Duplicate {
				correct++
			}
		}
		rows = append(rows, Row{
			Threshold:            t,
			Hits:                 hits,
			Correct:              correct,
			Precision:            Wilson(correct, hits),
			Recall:               Wilson(correct, dups),
			FalseHitRate:         Wilson(hits-correct, hits),
			FalsePerNonDuplicate: Wilson(hits-correct, nondups),
		})
	}
	return rows
}

// Rejections counts the guard's rejections by reason among pairs scoring at
// least threshold, split by label.
type Rejections struct {
	Reason       string `json:"reason"`
	Duplicate    int    `json:"duplicate"`
	NonDuplicate int    `json:"non_duplicate"`
}

// RejectionsAt counts guard rejections among outcomes with score >= t,
// ordered by reasons (reasons not in the list come last, by name).
func RejectionsAt(out []Outcome, t float64, reasons []string) []Rejections {
	by := map[string]*Rejections{}
	for _, o := range out {
		if o.GuardOK || o.Score < float32(t) {
			continue
		}
		r := by[o.Reason]
		if r == nil {
			r = &Rejections{Reason: o.Reason}
			by[o.Reason] = r
		}
		if o.Duplicate {
			r.Duplicate++
		} else {
			r.NonDuplicate++
		}
	}
	var res []Rejections
	for _, name := range reasons {
		if r, ok := by[name]; ok {
			res = append(res, *r)
			delete(by, name)
		}
	}
	for _, name := range sortedKeys(by) {
		res = append(res, *by[name])
	}
	return res
}

// Calibration picks the lowest threshold whose false-hit rate is, with 95 %
// confidence, at most Target.
type Calibration struct {
	Target float64 `json:"max_false_hit"`
	Guard  bool    `json:"guard"`
	// Found is false when no threshold meets the target; Row is then zero.
	Found bool `json:"found"`
	Row   Row  `json:"row"`
}

// PickThreshold returns the first row (lowest threshold, rows in ascending
// order) with at least one hit whose Wilson upper bound on the false-hit
// rate is <= target.
func PickThreshold(rows []Row, target float64) (Row, bool) {
	for _, r := range rows {
		if r.Hits > 0 && r.FalseHitRate.High <= target {
			return r, true
		}
	}
	return Row{}, false
}

// ParseThresholds parses "from:to:step" (inclusive, e.g. "0.80:0.99:0.01")
// or a comma-separated list ("0.90,0.93,0.95"). Values must lie in [0, 1]
// and come out in ascending order, rounded to 6 decimals so that steps do
// not drift.
func ParseThresholds(s string) ([]float64, error) {
	var ts []float64
	if strings.Contains(s, ":") {
		parts := strings.Split(s, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("parse thresholds %q: want from:to:step", s)
		}
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("parse thresholds %q: %w", s, err)
			}
			v[i] = f
		}
		from, to, step := v[0], v[1], v[2]
		if step <= 0 || to < from {
			return nil, fmt.Errorf("parse thresholds %q: want from <= to and step > 0", s)
		}
		n := int(math.Round((to-from)/step)) + 1
		if n > 10000 {
			return nil, fmt.Errorf("parse thresholds %q: more than 10000 steps", s)
		}
		for i := range n {
			ts = append(ts, math.Round((from+float64(i)*step)*1e6)/1e6)
		}
	} else {
		for _, p := range strings.Split(s, ",") {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("parse thresholds %q: %w", s, err)
			}
			ts = append(ts, f)
		}
	}
	for i, t := range ts {
		if t < 0 || t > 1 {
			return nil, fmt.Errorf("parse thresholds %q: %v is outside [0, 1]", s, t)
		}
		if i > 0 && t <= ts[i-1] {
			return nil, fmt.Errorf("parse thresholds %q: not ascending", s)
		}
	}
	return ts, nil
}
