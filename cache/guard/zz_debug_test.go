package guard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
)

func TestZZDebug(t *testing.T) {
	if os.Getenv("GUARD_DEBUG") == "" {
		t.Skip()
	}
	f, _ := os.Open("/work/shared/data/qqp-dev.jsonl")
	sf, _ := os.Open("/tmp/sims_full.tsv")
	sc := bufio.NewScanner(f)
	ss := bufio.NewScanner(sf)
	ct, _ := strconv.Atoi(os.Getenv("CT"))
	g := New(Options{NamesSubstitutedOnly: os.Getenv("SUB") != "", NoContent: ct == 0, MaxUnmatched: ct - 1})
	th, _ := strconv.ParseFloat(os.Getenv("TH"), 64)
	type cnt struct{ dup, non int }
	by := map[string]*cnt{}
	var hits, dups, gh, gd int
	show := os.Getenv("SHOW")
	alld := 0
	for sc.Scan() {
		if !ss.Scan() {
			break
		}
		sim, _ := strconv.ParseFloat(ss.Text(), 64)
		var p struct {
			A, B      string
			Duplicate bool
		}
		json.Unmarshal(sc.Bytes(), &p)
		if p.Duplicate {
			alld++
		}
		if !(sim >= th) {
			continue
		}
		hits++
		if p.Duplicate {
			dups++
		}
		ok, r := g.Check(p.A, p.B)
		if ok {
			gh++
			if p.Duplicate {
				gd++
			} else if show == "pass" {
				fmt.Printf("PASS-N %.3f | %s || %s\n", sim, p.A, p.B)
			}
			continue
		}
		if by[r] == nil {
			by[r] = &cnt{}
		}
		if p.Duplicate {
			by[r].dup++
			if show == r || show == "dup" {
				fmt.Printf("REJ-D %s %.3f | %s || %s\n", r, sim, p.A, p.B)
			}
		} else {
			by[r].non++
			if show == r+"n" {
				fmt.Printf("REJ-N %s %.3f | %s || %s\n", r, sim, p.A, p.B)
			}
		}
	}
	fmt.Printf("th=%.2f hits=%d prec=%.3f | guard hits=%d prec=%.3f dupkept=%d/%d\n", th, hits, float64(dups)/float64(hits), gh, float64(gd)/float64(gh), gd, dups)
	fmt.Printf("recall: %.3f -> %.3f\n", float64(dups)/float64(alld), float64(gd)/float64(alld))
	for r, c := range by {
		fmt.Printf("  %-11s dup=%d non=%d\n", r, c.dup, c.non)
	}
}
