package upstream

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLaneKey(t *testing.T) {
	held := Upstream{APIKey: "sk-sidecar"}
	fwd := Upstream{}
	a := http.Header{"Authorization": {"Bearer sk-a"}}
	b := http.Header{"Authorization": {"Bearer sk-b"}}
	anth := http.Header{"X-Api-Key": {"sk-ant"}}
	if laneKey(a, held) != "" {
		t.Error("a held key must give the target's common lane")
	}
	ka, kb, kc := laneKey(a, fwd), laneKey(b, fwd), laneKey(anth, fwd)
	if ka == "" || ka == kb || kc == "" || kc == ka {
		t.Errorf("lane keys %q %q %q: want distinct, non-empty", ka, kb, kc)
	}
	if ka != laneKey(a.Clone(), fwd) {
		t.Error("the same key gave two lanes")
	}
	for _, k := range []string{ka, kb, kc} {
		if len(k) != 16 {
			t.Errorf("lane key %q: want a 16-hex-digit hash, never the key", k)
		}
	}
}

func TestClientTimeout(t *testing.T) {
	for _, name := range deadlineHeaders {
		for _, tt := range []struct {
			v    string
			want time.Duration
		}{{"", math.MaxInt64}, {"600", 570 * time.Second}, {"2.5", 2375 * time.Millisecond}, {"0.1", time.Second},
			{"-1", math.MaxInt64}, {"soon", math.MaxInt64}, {"NaN", math.MaxInt64}, {"8s", 7600 * time.Millisecond},
			{"1m", 57 * time.Second}, {"-8s", math.MaxInt64}, {"100000", math.MaxInt64}} {
			h := http.Header{}
			if tt.v != "" {
				h.Set(name, tt.v)
			}
			if got := clientTimeout(h); got != tt.want {
				t.Errorf("clientTimeout(%s: %q) = %s, want %s", name, tt.v, got, tt.want)
			}
		}
	}
	// The earliest deadline a client states wins.
	h := http.Header{"X-Stainless-Timeout": {"600"}, "X-Stainless-Read-Timeout": {"20"}, "X-Breakwater-Timeout": {"40s"}}
	if got, want := clientTimeout(h), 19*time.Second; got != want {
		t.Errorf("clientTimeout(600, 20, 40s) = %s, want the earliest less 5%% = %s", got, want)
	}
}
