//go:build bwdump

package guard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

func unmatchedWords(a, b *text) []string {
	var out []string
	for _, ta := range a.toks {
		if ta.stem == "" {
			continue
		}
		found := false
		for _, tb := range b.toks {
			if tb.stem != "" && (ta.stem == tb.stem || commonPrefix(ta.stem, tb.stem) >= minPrefix) {
				found = true
				break
			}
		}
		if !found && !(len(ta.low) >= 4 && isPlain(ta.low) && strings.Contains(b.flat, ta.low)) {
			out = append(out, ta.low+"/"+ta.stem)
		}
	}
	return out
}

func TestDumpContent(t *testing.T) {
	f, _ := os.Open("/tmp/bwtool/scores.jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	g := New(Options{})
	w, _ := os.Create("/tmp/bwtool/tune_content.txt")
	cnt := map[string][2]int{}
	for sc.Scan() {
		var s struct {
			A, B  string
			Dup   bool
			Score float32
			Half  string
		}
		json.Unmarshal(sc.Bytes(), &s)
		if s.Half != "tune" || s.Score < 0.90 {
			continue
		}
		ok, r := g.Check(s.A, s.B)
		if ok || r != ReasonContent {
			continue
		}
		a, b := parse(s.A, nil), parse(s.B, nil)
		u := append(unmatchedWords(&a, &b), unmatchedWords(&b, &a)...)
		fmt.Fprintf(w, "%v\t%v\t%s || %s\n", s.Dup, u, s.A, s.B)
		if len(u) == 1 {
			c := cnt[u[0]]
			if s.Dup {
				c[0]++
			} else {
				c[1]++
			}
			cnt[u[0]] = c
		}
	}
	w.Close()
	type kv struct {
		k string
		v [2]int
	}
	var l []kv
	for k, v := range cnt {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v[0]+l[i].v[1] > l[j].v[0]+l[j].v[1] })
	for _, x := range l[:min(80, len(l))] {
		fmt.Printf("%-25s dup %3d nondup %3d\n", x.k, x.v[0], x.v[1])
	}
}
