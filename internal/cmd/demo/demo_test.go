package demo

import (
	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"

	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/internal/cmd/sim"
)

func TestDemo(t *testing.T) {
	res, err := Demo(t.Context(), Options{
		Capacity: 2, Latency: 100 * time.Millisecond, Jitter: 50 * time.Millisecond,
		Rate: 20, Duration: 3 * time.Second, DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	d, b := res.Direct, res.Breakwater
	if got, want := b.Bench.RateLimited, 0; got != want {
		t.Errorf("breakwater 429s = %d, want %d", got, want)
	}
	if b.Model.Calls >= d.Model.Calls {
		t.Errorf("upstream calls through breakwater = %d, want fewer than direct %d", b.Model.Calls, d.Model.Calls)
	}
	if d.Bench.RateLimited == 0 {
		t.Errorf("direct 429s = 0: the load did not exceed the model's capacity")
	}
	// Breakwater finds the capacity by probing: a few refusals, well under
	// what the app straight at the model gets. (This run is short, so slow
	// start weighs more than in TestPeakDrop, which holds the quarter.)
	if got, limit := b.Model.RateLimited, d.Model.RateLimited/2; got > limit {
		t.Errorf("model refused %d calls from breakwater, want at most %d (half of direct's %d)", got, limit, d.Model.RateLimited)
	}
	if p := res.Problems(); len(p) > 0 {
		t.Errorf("problems: %q", p)
	}
	var out bytes.Buffer
	res.WriteTable(&out)
	for _, want := range []string{"successful answers", "429s seen by the app", "upstream calls (model)", "latency p99", "✓ Breakwater's 429s to the app: 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it runs two load phases")
	}
	var out, errb bytes.Buffer
	args := []string{"-scenario", "cache", "-duration", "1s", "-rate", "10", "-capacity", "2", "-latency", "50ms", "-jitter", "20ms", "-json"}
	if err := Run(t.Context(), args, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	var results []struct {
		Direct, Breakwater struct {
			Bench struct {
				Scheduled int `json:"scheduled"`
				OK        int `json:"ok"`
			} `json:"bench"`
			Model struct {
				Calls int `json:"calls"`
			} `json:"model"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != 1 {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	res := results[0]
	if got, want := res.Breakwater.Bench.OK, res.Breakwater.Bench.Scheduled; got != want || got == 0 {
		t.Errorf("breakwater answered %d of %d", got, want)
	}
	if !strings.Contains(errb.String(), "phase 2/2") {
		t.Errorf("stderr lacks the phase lines: %s", errb.String())
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-capacity", "0"}, {"-repeat", "2"}, {"extra"}, {"-scenario", "nope"}, {"-short"}, {"-matrix", "-replicas", "3"}, {"-matrix", "-scenario", "drop"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := Run(t.Context(), args, &out, &errb); err == nil {
				t.Errorf("Run(%q) = nil, want an error", args)
			}
		})
	}
}

// TestPeakDrop runs a shortened capacity drop and recovery on default
// settings and checks the targets: through answers more than
// straight, at most a quarter of its upstream 429s, no 5xx, Retry-After on
// every refusal, nothing past the deadline.
func TestPeakDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it runs two load phases")
	}
	sc := Scenario{
		Name: "short drop", Capacity: 4, Latency: 100 * time.Millisecond,
		Steps: []sim.Step{{After: time.Second, Capacity: 1}, {After: 2 * time.Second, Capacity: 4}},
		Rate:  60, Duration: 3 * time.Second,
		Phases: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second},
	}
	res, err := Peak(t.Context(), sc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.WriteTable(&out)
	if p := res.Problems(); len(p) > 0 {
		t.Errorf("problems: %q\n%s", p, out.String())
	}
	if res.Straight.Phases[1].Answered >= res.Straight.Phases[0].Answered {
		t.Errorf("straight answered %d in the drop, %d before: the capacity did not drop\n%s",
			res.Straight.Phases[1].Answered, res.Straight.Phases[0].Answered, out.String())
	}
	if got, want := len(res.Through.Phases), 4; got != want {
		t.Errorf("phases = %d, want 3 and the drain", got)
	}
	// The table explains its drain row and the slower answers through.
	for _, want := range []string{`"drain" is after the load stopped`, "Answers through Breakwater are slower because"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table does not explain itself: no %q in\n%s", want, out.String())
		}
	}
}

// The Anthropic demo, on defaults (the judge included): the model answers
// 529 beyond its capacity and cuts some streams with an error event;
// through Breakwater the app sees neither. At a model of two slots the
// judge's calls lengthen the queue, so a popular question's stream gathers
// coalesced followers; a stream they share is resumed with every listener's
// budget, so one run of cuts does not reach them all at once.
func TestDemoAnthropic(t *testing.T) {
	res, err := Demo(t.Context(), Options{
		Capacity: 2, Latency: 100 * time.Millisecond, Jitter: 50 * time.Millisecond,
		Rate: 20, Duration: 3 * time.Second, DataDir: t.TempDir(), API: loadgen.APIAnthropic, CutRate: 0.2,
	})
	if err != nil {
		t.Fatal(err)
	}
	d, b := res.Direct, res.Breakwater
	if d.Bench.Overloaded == 0 || d.Bench.StreamErrors == 0 {
		t.Errorf("direct: %d 529s, %d cut streams; want both > 0 (the load must overload the model)", d.Bench.Overloaded, d.Bench.StreamErrors)
	}
	// A stream cut again on each of its resumes (the same simulated model,
	// 20% of streams) may still reach the app; 529s may not. A request the
	// model refused on every attempt (retry.max_attempts) is answered 429
	// with Retry-After, by design: on a CI machine whose cores other tests
	// hold, the simulated model's timing shifts and a few requests draw 529
	// three times (seen: 2-4 of 60, with the code before and after the
	// upstream pool). Those must stay few, and nothing else may fail.
	other := b.Bench.ServerErrors + b.Bench.ClientErrors + b.Bench.Errors
	if b.Bench.Overloaded != 0 || b.Bench.StreamErrors >= d.Bench.StreamErrors || other != 0 ||
		b.Bench.OK+b.Bench.StreamErrors+b.Bench.RateLimited != b.Bench.Scheduled ||
		b.Bench.RateLimited > b.Bench.Scheduled/10 || b.Bench.OK <= d.Bench.OK {
		t.Errorf("through breakwater: %d 529s, %d cut streams (direct %d), %d × 429, %d other errors, %d of %d answered (direct %d); "+
			"want no 529, fewer cuts, at most a tenth shed with 429, nothing else failing, more answered than direct",
			b.Bench.Overloaded, b.Bench.StreamErrors, d.Bench.StreamErrors, b.Bench.RateLimited, other, b.Bench.OK, b.Bench.Scheduled, d.Bench.OK)
	}
	var out bytes.Buffer
	res.WriteTable(&out)
	for _, want := range []string{"529s (overloaded) seen by the app", "streams cut mid-answer", "refused by the model (529)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log(out.String())
}

// TestPeakFleet runs a shortened peak through three sidecars that share
// nothing but the model, on default settings, beside straight and one
// sidecar, and checks the fleet's targets: at least what straight and 90 %
// of what one sidecar answers, at most a quarter of straight's upstream
// 429s, upstream calls at most 1.15 × the requests that reached the model,
// replicas within 80 % of each other, no 5xx, Retry-After on every 429.
func TestPeakFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it runs three load phases")
	}
	sc := Scenario{
		Name: "short fleet", Capacity: 4, Latency: 100 * time.Millisecond,
		Rate: 80, Duration: 3 * time.Second, Phases: []time.Duration{3 * time.Second},
		Replicas: 3,
	}
	res, err := Peak(t.Context(), sc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res.WriteTable(&out)
	if p := res.Problems(); len(p) > 0 {
		t.Errorf("problems: %q\n%s", p, out.String())
	}
	if len(res.More) != 1 || res.More[0].Replicas != 3 || len(res.More[0].PerReplica) != 3 {
		t.Fatalf("runs %+v, want one through 3 replicas with answers per replica", res.More)
	}
	t.Log(out.String())
}
