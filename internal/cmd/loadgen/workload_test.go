package loadgen

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPlan(t *testing.T) {
	items := Builtin(7)
	tests := []struct {
		name               string
		mix                Mix
		repeat, paraphrase float64
	}{
		{"defaults", Mix{Repeat: 0.3, Paraphrase: 0.2, Zipf: 1.1, Seed: 1}, 0.3, 0.2},
		{"all new", Mix{Seed: 2}, 0, 0},
		{"repeat heavy", Mix{Repeat: 0.6, Paraphrase: 0.1, Zipf: 1.5, Seed: 3}, 0.6, 0.1},
		// More paraphrases than new questions: second paraphrases fill in.
		{"paraphrase heavy", Mix{Repeat: 0.5, Paraphrase: 0.3, Zipf: 1.1, Seed: 1}, 0.5, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 300 // the built-in set has 320 questions: stay below running out
			plan := Plan(items, n, tt.mix)
			if got, want := len(plan), n; got != want {
				t.Fatalf("len = %d, want %d", got, want)
			}
			count := map[string]int{}
			seen := map[string]bool{}
			origin := map[string]string{}
			for _, it := range items {
				origin[it.Paraphrase] = it.Question
				origin[it.Another] = it.Question
			}
			for i, r := range plan {
				count[r.Kind]++
				switch r.Kind {
				case KindRepeat:
					if !seen[r.Question] {
						t.Fatalf("request %d repeats %q before it was asked", i, r.Question)
					}
				case KindParaphrase:
					if q := origin[r.Question]; !seen[q] || seen[r.Question] {
						t.Fatalf("request %d paraphrases %q: original asked %v, paraphrase asked before %v", i, r.Question, seen[q], seen[r.Question])
					}
				}
				seen[r.Question] = true
			}
			if got, want := float64(count[KindRepeat])/n, tt.repeat; math.Abs(got-want) > 0.06 {
				t.Errorf("repeat share = %.3f, want %.2f", got, want)
			}
			if got, want := float64(count[KindParaphrase])/n, tt.paraphrase; math.Abs(got-want) > 0.06 {
				t.Errorf("paraphrase share = %.3f, want %.2f", got, want)
			}
			if got, want := Plan(items, n, tt.mix), plan; !slices.Equal(got, want) {
				t.Error("same seed gave a different plan")
			}
		})
	}
}

// A second paraphrase is asked only by a mix that wants more paraphrases
// than new questions: the demo's default mix (50 % repeats, 20 %
// paraphrases) draws what it drew before items had second paraphrases, so
// the figures measured with it stand.
func TestPlanSecondParaphraseOnlyWhenNoFirst(t *testing.T) {
	items := Builtin(1)
	firstOnly := slices.Clone(items)
	for i := range firstOnly {
		firstOnly[i].Another = ""
	}
	for seed := uint64(1); seed <= 5; seed++ {
		for _, n := range []int{60, 400} {
			m := Mix{Repeat: 0.5, Paraphrase: 0.2, Zipf: 1.1, Seed: seed}
			if !slices.Equal(Plan(items, n, m), Plan(firstOnly, n, m)) {
				t.Errorf("seed %d, %d requests: second paraphrases changed a plan of the default mix", seed, n)
			}
		}
	}
	// At 30 % they are what lets the share be reached at all.
	m := Mix{Repeat: 0.5, Paraphrase: 0.3, Zipf: 1.1, Seed: 1}
	count := func(plan []Request) (n int) {
		for _, r := range plan {
			if r.Kind == KindParaphrase {
				n++
			}
		}
		return n
	}
	with, without := count(Plan(items, 400, m)), count(Plan(firstOnly, 400, m))
	if with < 110 || without > 105 {
		t.Errorf("paraphrases in 400 requests at a 30 %% mix: %d with second paraphrases, %d without; want >= 110 and <= 105", with, without)
	}
}

func TestPlanSmallPool(t *testing.T) {
	items := []Item{{Question: "a", Paraphrase: "a2"}, {Question: "b"}}
	plan := Plan(items, 10, Mix{Seed: 1})
	if got, want := len(plan), 10; got != want {
		t.Fatalf("len = %d, want %d (falls back to repeats when new questions run out)", got, want)
	}
	if got, want := plan[0].Kind, KindNew; got != want {
		t.Errorf("first kind = %q, want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	qqp := filepath.Join(dir, "pairs.jsonl")
	os.WriteFile(qqp, []byte(`{"a": "How do I learn Go?", "b": "What is the best way to learn Go?", "duplicate": true}
{"a": "What is 2+2?", "b": "What is 2+3?", "duplicate": false}
`), 0o600)
	plain := filepath.Join(dir, "questions.txt")
	os.WriteFile(plain, []byte("# comment\nWhy?\tHow come?\n\nWhat now?\n"), 0o600)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{not json\n"), 0o600)

	tests := []struct {
		workload, pairs string
		want            []Item
		wantErr         bool
	}{
		{"qqp", qqp, []Item{{Question: "How do I learn Go?", Paraphrase: "What is the best way to learn Go?"}, {Question: "What is 2+2?"}}, false},
		{plain, "", []Item{{Question: "What now?"}, {Question: "Why?", Paraphrase: "How come?"}}, false},
		{"qqp", bad, nil, true},
		{"qqp", filepath.Join(dir, "missing"), nil, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", filepath.Base(tt.workload), filepath.Base(tt.pairs)), func(t *testing.T) {
			got, err := LoadWorkload(tt.workload, tt.pairs, 1)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			slices.SortFunc(got, func(a, b Item) int { return len(b.Question) - len(a.Question) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("items = %q, want %q", got, tt.want)
			}
		})
	}
}
