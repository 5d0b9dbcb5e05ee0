//go:build bwdump

package guard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

func hasAny(t *text, ws ...string) bool {
	for _, w := range ws {
		if t.has(w) {
			return true
		}
	}
	return false
}

func person(t *text) (first, second bool) {
	return hasAny(t, "i", "me", "my", "mine", "myself", "i'm", "im", "i've", "ive"), hasAny(t, "you", "your", "yours", "yourself", "you're", "youre")
}

func modal(t *text) string {
	for _, tk := range t.toks {
		switch tk.low {
		case "should", "must", "shall":
			return "should"
		case "can", "could", "able":
			return "can"
		}
	}
	return ""
}

func TestProbe(t *testing.T) {
	f, _ := os.Open("/tmp/bwtool/scores.jsonl")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	g := New(Options{})
	c := map[string][2]int{}
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
		if ok, _ := g.Check(s.A, s.B); !ok {
			continue
		}
		a, b := parse(s.A, nil), parse(s.B, nil)
		add := func(k string) {
			x := c[k]
			if s.Dup {
				x[0]++
			} else {
				x[1]++
			}
			c[k] = x
		}
		add("all")
		f1, s1 := person(&a)
		f2, s2 := person(&b)
		if (f1 && !s1 && s2 && !f2) || (f2 && !s2 && s1 && !f1) {
			add("person")
		}
		if f1 != f2 || s1 != s2 {
			add("person-loose")
		}
		m1, m2 := modal(&a), modal(&b)
		if m1 != m2 && m1 != "" && m2 != "" {
			add("modal-both")
		}
		if m1 != m2 && (m1 == "should" || m2 == "should") {
			add("modal-should")
		}
	}
	fmt.Println(c)
}
