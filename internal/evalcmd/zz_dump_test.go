//go:build bwdump

package evalcmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/cache/guard"
)

type scored struct {
	A, B  string
	Dup   bool
	Score float32
	Half  string
}

func TestDumpScores(t *testing.T) {
	f, _ := os.Open("/work/shared/data/qqp-dev.jsonl")
	pairs, err := ReadPairs(f)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := defaultDeps.newEmbedder()
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := defaultDeps.newIndex(emb, len(pairs))
	out, skipped, err := Measure(context.Background(), pairs, emb, idx, nil, nil)
	if err != nil || skipped != 0 {
		t.Fatal(err, skipped)
	}
	w, _ := os.Create("/tmp/bwtool/scores.jsonl")
	enc := json.NewEncoder(w)
	for i, p := range pairs {
		enc.Encode(scored{p.A, p.B, p.Duplicate, out[i].Score, Half(p)})
	}
	w.Close()
}

func TestSweep(t *testing.T) {
	f, _ := os.Open("/tmp/bwtool/scores.jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var all []scored
	for sc.Scan() {
		var s scored
		json.Unmarshal(sc.Bytes(), &s)
		all = append(all, s)
	}
	opts, _, _ := guardOptions(os.Getenv("DISABLE"))
	g := guard.New(opts)
	ths := []float64{0.88, 0.89, 0.90, 0.91, 0.92, 0.93, 0.94, 0.95}
	outs := map[string][]Outcome{}
	fp, _ := os.Create("/tmp/bwtool/tune_fp.txt")
	fn, _ := os.Create("/tmp/bwtool/tune_fn.txt")
	reasons := map[string][2]int{}
	for _, s := range all {
		o := Outcome{Score: s.Score, Duplicate: s.Dup, GuardOK: true}
		if s.Score >= 0.85 {
			o.GuardOK, o.Reason = g.Check(s.A, s.B)
		}
		outs[s.Half] = append(outs[s.Half], o)
		outs["all"] = append(outs["all"], o)
		if s.Half == "tune" && s.Score >= 0.91 {
			if o.GuardOK && !s.Dup {
				fmt.Fprintf(fp, "%.3f\t%s\t||\t%s\n", s.Score, s.A, s.B)
			}
			if !o.GuardOK && s.Dup {
				fmt.Fprintf(fn, "%s\t%.3f\t%s\t||\t%s\n", o.Reason, s.Score, s.A, s.B)
			}
			if !o.GuardOK {
				r := reasons[o.Reason]
				if s.Dup {
					r[0]++
				} else {
					r[1]++
				}
				reasons[o.Reason] = r
			}
		}
	}
	fp.Close()
	fn.Close()
	for _, h := range []string{"tune", "holdout", "all"} {
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%d pairs)\n", h, len(outs[h]))
		for _, r := range Table(outs[h], ths, true) {
			fmt.Fprintf(&b, "  %.2f hits %4d  P %s  R %s\n", r.Threshold, r.Hits, ci(r.Precision), ci(r.Recall))
		}
		t.Log(b.String())
	}
	keys := make([]string, 0)
	for k := range reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("tune >=0.91 rejected %-10s dup %4d nondup %4d", k, reasons[k][0], reasons[k][1])
	}
}
