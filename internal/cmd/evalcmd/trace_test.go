package evalcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/breakwater-dev/breakwater/embed"
)

// lockedEmbedder makes the fake embedder safe for the replay's concurrent
// callers (the proxy and the write-back queue).
type lockedEmbedder struct {
	mu sync.Mutex
	f  *fakeEmbedder
}

func (l *lockedEmbedder) Name() string   { return l.f.Name() }
func (l *lockedEmbedder) Dimension() int { return l.f.Dimension() }
func (l *lockedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Embed(ctx, texts)
}

var tracePairs = []Pair{
	{A: "How do I learn Go fast?", B: "How can I learn Go fast?", Duplicate: true},
	{A: "How can I learn Go fast?", B: "What is the fastest way to learn Go?", Duplicate: true},
	{A: "How do I learn Go fast?", B: "How do I learn Rust fast?", Duplicate: false},
	{A: "How can I improve my English?", B: "How can I improve my English", Duplicate: true},
	{A: "How can I improve my English?", B: "How can I improve my French?", Duplicate: false},
	{A: "How can I improve my English?", B: "How can I really improve my English?", Duplicate: false},
	{A: "Why is the sky blue?", B: "Why is the sea blue?", Duplicate: false},
}

func TestBuildTrace(t *testing.T) {
	tr, err := BuildTrace(tracePairs, TraceOptions{Requests: 3000, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 3000 {
		t.Fatalf("len = %d", len(tr))
	}
	answer := map[string]string{}
	count := map[string]int{}
	for _, l := range tr {
		if prev, ok := answer[l.Question]; ok && prev != l.Answer {
			t.Fatalf("%q has answers %s and %s", l.Question, prev, l.Answer)
		}
		answer[l.Question] = l.Answer
		count[l.Answer]++
	}
	same := func(a, b string) bool { return answer[a] != "" && answer[a] == answer[b] }
	if !same("How do I learn Go fast?", "What is the fastest way to learn Go?") {
		t.Error("union-find did not join a cluster through a shared question")
	}
	if !same("How can I improve my English?", "How can I improve my English") {
		t.Error("duplicate pair not one cluster")
	}
	for _, d := range []string{"How do I learn Rust fast?", "How can I improve my French?"} {
		if answer[d] == "" || same(d, "How do I learn Go fast?") || same(d, "How can I improve my English?") {
			t.Errorf("distractor %q missing or sharing an answer", d)
		}
	}
	for _, q := range []string{"Why is the sky blue?", "Why is the sea blue?"} {
		if _, ok := answer[q]; ok {
			t.Errorf("%q is neither in a paraphrase cluster nor a distractor of one, but was drawn", q)
		}
	}
	// Zipf(1.0) over 5 ranks: the top rank gets 1/H(5) = 0.438 of the draws.
	top := 0
	for _, n := range count {
		top = max(top, n)
	}
	if f := float64(top) / 3000; f < 0.40 || f > 0.48 {
		t.Errorf("top rank share = %.3f, want about 0.44", f)
	}
	again, _ := BuildTrace(tracePairs, TraceOptions{Requests: 3000, Seed: 7})
	for i := range tr {
		if tr[i] != again[i] {
			t.Fatal("the same seed built a different trace")
		}
	}
}

func TestReadTrace(t *testing.T) {
	tr, err := ReadTrace(strings.NewReader("{\"question\":\"q\",\"answer\":\"a1\"}\n\n{\"question\":\"r\",\"answer\":\"a2\"}\n"))
	if err != nil || len(tr) != 2 || tr[1].Answer != "a2" {
		t.Fatalf("ReadTrace = %v, %v", tr, err)
	}
	for _, bad := range []string{"{\"question\":\"q\"}\n", "not json\n"} {
		if _, err := ReadTrace(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ReadTrace(%q) error = %v, want one naming line 1", bad, err)
		}
	}
}

func replayReport(t *testing.T, accuracy string, extra ...string) TraceReport {
	t.Helper()
	d := testDeps(t, nil)
	le := &lockedEmbedder{f: &fakeEmbedder{}}
	d.newEmbedder = func() (embed.Embedder, error) { return le, nil }
	var out, errb bytes.Buffer
	args := []string{"-from-pairs", writePairs(t, tracePairs), "-requests", "300", "-json", "-judge-accuracy", accuracy, "-sample-rate", "0.2"}
	args = append(args, extra...)
	if err := runEval(t.Context(), args, &out, &errb, d); err != nil {
		t.Fatalf("eval: %v\n%s", err, errb.String())
	}
	var rep TraceReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Modes) != 2 || rep.Modes[0].Mode != ModeStatic || rep.Modes[1].Mode != ModeVerified {
		t.Fatalf("modes = %+v", rep.Modes)
	}
	return rep
}

func TestReplayStaticAndVerified(t *testing.T) {
	rep := replayReport(t, "1")
	for _, m := range rep.Modes {
		if served := int64(m.ExactHits + m.SemanticHits); m.UpstreamCalls != int64(m.Requests)-served {
			t.Errorf("%s: upstream calls %d, want requests - hits = %d", m.Mode, m.UpstreamCalls, int64(m.Requests)-served)
		}
		if m.RightHits+m.WrongHits != m.SemanticHits {
			t.Errorf("%s: right %d + wrong %d != semantic %d", m.Mode, m.RightHits, m.WrongHits, m.SemanticHits)
		}
	}
	static, verified := rep.Modes[0], rep.Modes[1]
	if static.Judge.Calls != 0 || verified.Judge.Calls == 0 {
		t.Errorf("judge calls: static %d, verified %d; want 0 and some", static.Judge.Calls, verified.Judge.Calls)
	}
	if verified.WrongHits != 0 {
		t.Errorf("a judge that is always right let %d wrong hits through", verified.WrongHits)
	}
	if verified.RightHits < static.RightHits {
		t.Errorf("verified right hits %d < static %d", verified.RightHits, static.RightHits)
	}
	// New wordings: the same requests in both modes, each a question asked
	// for the first time in the trace.
	tr, err := BuildTrace(tracePairs, TraceOptions{Requests: 300, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	for _, l := range tr {
		distinct[l.Question] = true
	}
	for _, m := range rep.Modes {
		if m.NewWordings != len(distinct) {
			t.Errorf("%s: %d new wordings, want the trace's %d distinct questions", m.Mode, m.NewWordings, len(distinct))
		}
		if m.NewRight+m.NewWrong > m.NewWordings || m.NewRight > m.ExactHits-m.ExactWrong+m.RightHits {
			t.Errorf("%s: new wordings %d right, %d wrong of %d; answers right from the cache %d", m.Mode, m.NewRight, m.NewWrong,
				m.NewWordings, m.ExactHits-m.ExactWrong+m.RightHits)
		}
	}
	// A new wording has no exact entry: what the cache answers it is a
	// semantic hit, in either mode.
	for _, m := range rep.Modes {
		if m.NewRight > m.RightHits || m.NewWrong > m.WrongHits {
			t.Errorf("%s: new wordings %d right, %d wrong; semantic hits %d right, %d wrong", m.Mode, m.NewRight, m.NewWrong, m.RightHits, m.WrongHits)
		}
	}
	if verified.NewWrong != 0 || verified.NewRight < static.NewRight {
		t.Errorf("new wordings right/wrong: verified %d/%d, static %d/%d; an always-right judge serves none wrong and no fewer right",
			verified.NewRight, verified.NewWrong, static.NewRight, static.NewWrong)
	}
	q := rep.NewWordingRatio
	if want := float64(verified.NewRight) / float64(static.NewRight); q.Value != want || q.Resamples == 0 || q.Low > q.Value || q.High < q.Value {
		t.Errorf("new-wording ratio %+v, want %.3f within its interval", q, want)
	}
}

// The ratio's interval resamples the new wordings in pairs: two modes that
// answer the same wordings give exactly 1, and a mode that answers twice as
// many (a superset) gives 2 within an interval above 1.
func TestNewWordingRatio(t *testing.T) {
	static, verified := ModeReport{newRight: make([]bool, 400)}, ModeReport{newRight: make([]bool, 400)}
	for i := range 400 {
		static.newRight[i] = i%8 == 0
		verified.newRight[i] = i%4 == 0
	}
	static.NewRight, verified.NewRight = 50, 100
	same := NewWordingRatio(static, static, 1)
	if same.Value != 1 || same.Low != 1 || same.High != 1 {
		t.Errorf("a mode against itself: %+v, want exactly 1", same)
	}
	q := NewWordingRatio(static, verified, 1)
	if q.Value != 2 || q.Low <= 1 || q.Low >= 2 || q.High <= 2 || q.Resamples != bootstrapResamples {
		t.Errorf("twice the right answers: %+v, want 2 within an interval above 1", q)
	}
	if got := NewWordingRatio(ModeReport{}, verified, 1); got != (Ratio{}) {
		t.Errorf("no static answers: %+v, want no ratio", got)
	}
}

func TestReplayWrongJudgeServesWrongHits(t *testing.T) {
	rep := replayReport(t, "0")
	if v := rep.Modes[1]; v.WrongHits == 0 || v.RightHits != 0 {
		t.Errorf("a judge that is always wrong: right %d, wrong %d; want only wrong hits", v.RightHits, v.WrongHits)
	}
}

// Requests spread over end users: under "never" no end user is served
// another's entry, so the static mode serves fewer semantic hits than
// under "any", which serves what the trace without identities serves.
func TestReplayEndUsers(t *testing.T) {
	anon := replayReport(t, "1")
	anyUser := replayReport(t, "1", "-users", "50", "-cross-user", "any")
	never := replayReport(t, "1", "-users", "50", "-cross-user", "never")
	if anyUser.Users != 50 || never.CrossUser != "never" {
		t.Errorf("report: users %d, cross_user %q", anyUser.Users, never.CrossUser)
	}
	if a, n := anyUser.Modes[0].SemanticHits, anon.Modes[0].SemanticHits; a != n {
		t.Errorf("static semantic hits: %d with 50 users under any, %d without identities; want equal", a, n)
	}
	if n, a := never.Modes[0].SemanticHits, anyUser.Modes[0].SemanticHits; n >= a {
		t.Errorf("static semantic hits: %d under never, %d under any; want fewer", n, a)
	}
}
