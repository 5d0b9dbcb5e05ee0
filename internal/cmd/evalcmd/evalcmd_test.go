package evalcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/embedded"
	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/embed"
)

// fakeEmbedder hashes lower-cased words into a small bag-of-words vector, so
// texts sharing words score high. EmbedFunc, when set, replaces it.
type fakeEmbedder struct {
	EmbedFunc func(ctx context.Context, texts []string) ([][]float32, error)
	calls     int
}

const fakeDim = 64

func (f *fakeEmbedder) Name() string   { return "fake:bow" }
func (f *fakeEmbedder) Dimension() int { return fakeDim }

func (f *fakeEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	f.calls++
	if f.EmbedFunc != nil {
		return f.EmbedFunc(ctx, texts)
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if strings.ContainsRune(t, '\uFFFD') {
			return nil, fmt.Errorf("embed text %d: %w", i, embed.ErrInvalidText)
		}
		v := make([]float32, fakeDim)
		for _, w := range strings.Fields(strings.ToLower(t)) {
			h := fnv.New32a()
			h.Write([]byte(strings.Trim(w, "?.,!")))
			v[h.Sum32()%fakeDim]++
		}
		var n float64
		for _, x := range v {
			n += float64(x) * float64(x)
		}
		for k := range v {
			v[k] = float32(float64(v[k]) / math.Sqrt(n))
		}
		out[i] = v
	}
	return out, nil
}

// testDeps wires the fake embedder to the real (in-memory) embedded index.
func testDeps(t *testing.T, f *fakeEmbedder) deps {
	t.Helper()
	return deps{
		newEmbedder: func() (embed.Embedder, error) { return f, nil },
		newIndex:    defaultDeps.newIndex,
	}
}

func openIndex(t *testing.T, e embed.Embedder) cache.Index {
	t.Helper()
	idx, err := embedded.Open(embedded.Options{Dimension: e.Dimension(), EmbedderName: e.Name(), SweepEvery: -1})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	t.Cleanup(func() { idx.Close() })
	return idx
}

var testPairs = []Pair{
	{A: "How do I learn Go quickly?", B: "How do I learn Go quickly?", Duplicate: true},
	{A: "Which is the best phone under Rs. 5000?", B: "Which is the best phone under Rs. 4000?", Duplicate: false},
	{A: "What is the capital of France?", B: "Why is the sky blue?", Duplicate: false},
	{A: "How can I improve my English?", B: "How can I improve my English", Duplicate: true},
	{A: "Why do cats purr?", B: "Why do cats purr", Duplicate: false}, // a label the tier gets wrong
}

func writePairs(t *testing.T, pairs []Pair) string {
	t.Helper()
	var b bytes.Buffer
	for _, p := range pairs {
		line, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "pairs.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMeasure(t *testing.T) {
	f := &fakeEmbedder{}
	idx := openIndex(t, f)
	out, skipped, err := Measure(t.Context(), testPairs, f, idx, guard.New(guard.Options{}).Check, nil)
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if got, want := len(out), len(testPairs); got != want {
		t.Fatalf("len(out) = %d, want %d", got, want)
	}
	if got, want := skipped, 0; got != want {
		t.Errorf("skipped = %d, want %d", got, want)
	}
	tests := []struct {
		name     string
		i        int
		minScore float32
		maxScore float32
		guardOK  bool
		reason   string
	}{
		{"identical", 0, 0.999, 1.001, true, ""},
		{"amounts differ", 1, 0.7, 1, false, guard.ReasonNumber},
		{"unrelated", 2, -1, 0.5, false, guard.ReasonName},
		{"punctuation", 3, 0.999, 1.001, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := out[tt.i]
			if o.Score < tt.minScore || o.Score > tt.maxScore {
				t.Errorf("Score = %v, want in [%v, %v]", o.Score, tt.minScore, tt.maxScore)
			}
			if got, want := o.GuardOK, tt.guardOK; got != want {
				t.Errorf("GuardOK = %v, want %v", got, want)
			}
			if got, want := o.Reason, tt.reason; got != want {
				t.Errorf("Reason = %q, want %q", got, want)
			}
			if got, want := o.Duplicate, testPairs[tt.i].Duplicate; got != want {
				t.Errorf("Duplicate = %v, want %v", got, want)
			}
		})
	}
	// Each unique text is embedded once, in one batch here.
	if got, want := f.calls, 1; got != want {
		t.Errorf("Embed calls = %d, want %d", got, want)
	}
}

func TestMeasureSkipsInvalidText(t *testing.T) {
	f := &fakeEmbedder{}
	pairs := append([]Pair{{A: "bad \uFFFD text", B: "fine"}, {A: "", B: "empty query"}}, testPairs...)
	out, skipped, err := Measure(t.Context(), pairs, f, openIndex(t, f), nil, nil)
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if got, want := skipped, 2; got != want {
		t.Errorf("skipped = %d, want %d", got, want)
	}
	if got, want := len(out), len(testPairs); got != want {
		t.Errorf("len(out) = %d, want %d", got, want)
	}
}

func TestMeasureEmbedError(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeEmbedder{EmbedFunc: func(context.Context, []string) ([][]float32, error) { return nil, boom }}
	_, _, err := Measure(t.Context(), testPairs, f, openIndex(t, f), nil, nil)
	if !errors.Is(err, boom) {
		t.Errorf("Measure error = %v, want %v", err, boom)
	}
}

func TestRunJSONAndPlot(t *testing.T) {
	path := writePairs(t, testPairs)
	plotPath := filepath.Join(t.TempDir(), "pr.png")
	var stdout, stderr bytes.Buffer
	args := []string{"-pairs", path, "-json", "-thresholds", "0.80:0.99:0.01", "-plot", plotPath}
	if err := runEval(t.Context(), args, &stdout, &stderr, testDeps(t, &fakeEmbedder{})); err != nil {
		t.Fatalf("eval: %v (stderr %s)", err, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	if got, want := rep.Pairs, 5; got != want {
		t.Errorf("Pairs = %d, want %d", got, want)
	}
	if got, want := rep.Duplicates, 2; got != want {
		t.Errorf("Duplicates = %d, want %d", got, want)
	}
	if got, want := len(rep.WithGuard), 20; got != want {
		t.Fatalf("len(WithGuard) = %d, want %d", got, want)
	}
	// At 0.99: hits are pairs 0, 3 and 4 (identical but for punctuation);
	// the amounts pair scores lower with this embedder.
	last := rep.WithoutGuard[19]
	if got, want := last.Hits, 3; got != want {
		t.Errorf("hits at 0.99 without guard = %d, want %d", got, want)
	}
	if got, want := last.Correct, 2; got != want {
		t.Errorf("correct at 0.99 = %d, want %d", got, want)
	}
	if got, want := last.Recall.Value, 1.0; got != want {
		t.Errorf("recall at 0.99 = %v, want %v", got, want)
	}
	if got, want := last.FalsePerNonDuplicate.Value, 1.0/3; math.Abs(got-want) > 1e-9 {
		t.Errorf("false hits per non-duplicate at 0.99 = %v, want %v", got, want)
	}
	first := rep.WithGuard[0]
	if first.Hits >= rep.WithoutGuard[0].Hits {
		t.Errorf("guarded hits at 0.80 = %d, want fewer than %d", first.Hits, rep.WithoutGuard[0].Hits)
	}
	if len(rep.Rejections) == 0 || rep.Rejections[0].Reason != guard.ReasonNumber {
		t.Errorf("Rejections = %+v, want the number rejection first", rep.Rejections)
	}
	st, err := os.Stat(plotPath)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if st.Size() < 1000 {
		t.Errorf("plot is %d bytes, want a real PNG", st.Size())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing when it is not a terminal", stderr.String())
	}
}

func TestRunText(t *testing.T) {
	path := writePairs(t, testPairs)
	var stdout, stderr bytes.Buffer
	args := []string{"-pairs", path, "-thresholds", "0.50,0.95", "-limit", "4"}
	if err := runEval(t.Context(), args, &stdout, &stderr, testDeps(t, &fakeEmbedder{})); err != nil {
		t.Fatalf("eval: %v", err)
	}
	out := stdout.String()
	for _, want := range []string{"pairs 4 (2 duplicate, 2 not)", "without guard", "with guard", "0.95", "number"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestCalibrate(t *testing.T) {
	path := writePairs(t, testPairs)
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		// With the guard, the hits at >= 0.80 are pairs 0, 3 and 4: one of
		// three is wrong, and three hits cannot bound the rate under 0.5.
		{"guard, target too tight", []string{"-max-false-hit", "0.5"}, "no threshold", true},
		{"guard, loose target", []string{"-max-false-hit", "0.95"}, "threshold = 0.80", false},
		{"no guard", []string{"-max-false-hit", "0.95", "-guard=false"}, "threshold = 0.80", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"-pairs", path}, tt.args...)
			err := runCalibrate(t.Context(), args, &stdout, &stderr, testDeps(t, &fakeEmbedder{}))
			if got, want := err != nil, tt.wantErr; got != want {
				t.Fatalf("calibrate error = %v, want error %v", err, want)
			}
			if !strings.Contains(stdout.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, stdout.String())
			}
		})
	}
}

func TestRunFlagErrors(t *testing.T) {
	path := writePairs(t, testPairs)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no pairs", nil, "-pairs is required"},
		{"missing file", []string{"-pairs", filepath.Join(t.TempDir(), "nope.jsonl")}, "open pairs"},
		{"bad thresholds", []string{"-pairs", path, "-thresholds", "0.9:0.8:0.01"}, "parse thresholds"},
		{"bad rule", []string{"-pairs", path, "-disable-rules", "vibes"}, "unknown rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runEval(t.Context(), tt.args, &stdout, &stderr, testDeps(t, &fakeEmbedder{}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("eval error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestReadPairs(t *testing.T) {
	in := "{\"a\":\"x\",\"b\":\"y\",\"duplicate\":true}\n\n{\"a\":\"p\",\"b\":\"q\",\"duplicate\":false}\n"
	pairs, err := ReadPairs(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadPairs: %v", err)
	}
	if got, want := len(pairs), 2; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
	if got, want := pairs[0], (Pair{A: "x", B: "y", Duplicate: true}); got != want {
		t.Errorf("pairs[0] = %+v, want %+v", got, want)
	}
	if _, err := ReadPairs(strings.NewReader("{\"a\":\"x\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ReadPairs(bad) error = %v, want one naming line 2", err)
	}
}

func TestSample(t *testing.T) {
	pairs := make([]Pair, 100)
	for i := range pairs {
		pairs[i].A = fmt.Sprint(i)
	}
	a, b := Sample(pairs, 10, 7), Sample(pairs, 10, 7)
	if got, want := len(a), 10; got != want {
		t.Fatalf("len = %d, want %d", got, want)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("Sample is not reproducible: %v vs %v", a, b)
		}
	}
	if got, want := len(Sample(pairs, 0, 7)), 100; got != want {
		t.Errorf("Sample(0) len = %d, want %d", got, want)
	}
}
