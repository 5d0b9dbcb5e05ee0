package proxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// What /stats counts is what X-Breakwater-Cache told the clients: a client
// that tallies the header over bad inputs, hits, misses, streams and
// pass-throughs finds every counter equal, and the administrative endpoints
// claim no outcome at all.
func TestStatsAgreeWithCacheHeaders(t *testing.T) {
	e := newEnv(t, envOptions{})
	tally := map[string]uint64{}
	var requests uint64
	send := func(what string, r reply, wantStatus int) {
		t.Helper()
		if r.status != wantStatus {
			t.Fatalf("%s: status %d, want %d: %s", what, r.status, wantStatus, r.body)
		}
		got := r.header.Values(HeaderCache)
		if len(got) != 1 {
			t.Fatalf("%s: X-Breakwater-Cache = %q, want one value", what, got)
		}
		tally[got[0]]++
		requests++
	}
	// Refused before the lookup.
	send("not JSON", e.post("/v1/chat/completions", `{"model":`), 400)
	send("duplicate field", e.post("/v1/chat/completions", `{"model":"gpt-test","model":"x","messages":[{"role":"user","content":"hi"}]}`), 400)
	send("wrong type", e.post("/v1/chat/completions", `{"model":"gpt-test","messages":"hi"}`), 400)
	send("body too large", e.post("/v1/chat/completions", chat(strings.Repeat("x", 70<<10))), 413)
	send("bad control header", e.post("/v1/chat/completions", chat("hi"), HeaderThreshold, "high"), 400)
	send("Messages not JSON", e.post("/v1/messages", `[1,2`, "anthropic-version", "2023-06-01"), 400)
	send("no model", e.post("/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`), 400)
	// Through the cache.
	send("miss", e.post("/v1/chat/completions", chat("what is the capital of france")), 200)
	send("exact hit", e.post("/v1/chat/completions", chat("what is the capital of france")), 200)
	e.waitIndexed(1)
	send("semantic hit", e.post("/v1/chat/completions", chat("the capital of france is what")), 200)
	send("stream miss", e.post("/v1/chat/completions", `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"name a colour"}]}`), 200)
	e.waitStreams()
	send("stream hit", e.post("/v1/chat/completions", `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"name a colour"}]}`), 200)
	send("no-cache", e.post("/v1/chat/completions", chat("what is the capital of france"), "Cache-Control", "no-cache, no-store"), 200)
	// An API's own handler and a pass-through.
	send("models", e.get("/v1/models"), 200)
	send("pass-through", e.post("/v1/files", `{"purpose":"batch"}`), 200)
	for _, o := range []string{OutcomeBypass, OutcomeMiss, OutcomeHitExact, OutcomeHitSemantic} {
		if tally[o] == 0 {
			t.Fatalf("no %s answer among %v: the test does not cover it", o, tally)
		}
	}

	// Administrative and metrics endpoints claim no cache outcome.
	for _, p := range []string{"/stats", "/healthz", "/readyz", "/dashboard"} {
		if r := e.get(p); r.header.Get(HeaderCache) != "" {
			t.Errorf("GET %s: X-Breakwater-Cache = %q, want none", p, r.header.Get(HeaderCache))
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, e.front.URL+"/admin/cache", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := resp.Header.Get(HeaderCache); v != "" {
		t.Errorf("DELETE /admin/cache (status %d): X-Breakwater-Cache = %q, want none", resp.StatusCode, v)
	}

	var st Stats
	if err := json.Unmarshal(e.get("/stats").body, &st); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		field     string
		got, want uint64
	}{
		{"requests", st.Requests, requests},
		{"hits_exact", st.HitsExact, tally[OutcomeHitExact]},
		{"hits_semantic", st.HitsSemantic, tally[OutcomeHitSemantic]},
		{"misses", st.Misses, tally[OutcomeMiss]},
		{"misses_sampled", st.MissesSampled, tally[OutcomeMissSampled]},
		{"bypass", st.Bypass, tally[OutcomeBypass]},
		{"stale", st.Stale, tally[OutcomeStale]},
	} {
		if c.got != c.want {
			t.Errorf("/stats %s = %d, the headers said %d (tally %v)", c.field, c.got, c.want, tally)
		}
	}
	var minute uint64
	for _, p := range st.Timeline {
		minute += p.Requests
	}
	if minute != requests {
		t.Errorf("/stats timeline counts %d requests, the headers said %d", minute, requests)
	}
}
