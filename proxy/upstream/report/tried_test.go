package report

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream/lane"
)

// TestTriedIsBounded: a call's steps are listed up to maxTried; beyond, the
// first maxTried-1 and the last, with how many were left out, and each wait
// is the time from an attempt's end to the next one's start.
func TestTriedIsBounded(t *testing.T) {
	var tr Tried
	at := time.Unix(1_700_000_000, 0)
	const n = 12
	for i := range n {
		s := Step{Target: "a/m" + strconv.Itoa(i), Status: 429, Limit: lane.LimitTokens}
		if i == n-1 {
			s = Step{Target: "a/last", Status: 200}
		}
		tr.Add(s, at, at.Add(100*time.Millisecond))
		at = at.Add(1100 * time.Millisecond) // 1 s between an end and the next start
	}
	if tr.N != n || len(tr.Steps()) != maxTried {
		t.Fatalf("N = %d, %d steps kept; want %d, %d", tr.N, len(tr.Steps()), n, maxTried)
	}
	got := tr.String()
	want := "a/m0 429 tokens, waited 1s; a/m1 429 tokens, waited 1s; a/m2 429 tokens, waited 1s; a/m3 429 tokens, waited 1s; " +
		"a/m4 429 tokens, waited 1s; a/m5 429 tokens, waited 1s; a/m6 429 tokens, waited 1s; … 4 more; a/last 200"
	if got != want {
		t.Errorf("String =\n%q\nwant\n%q", got, want)
	}
	if strings.Count(got, ";") != maxTried {
		t.Errorf("%d parts, want %d", strings.Count(got, ";")+1, maxTried+1)
	}
	var shed Tried
	shed.Shed("a/m", lane.ShedQueueFull)
	if got, want := shed.String(), "a/m shed queue_full"; got != want {
		t.Errorf("a shed: %q, want %q", got, want)
	}
}
