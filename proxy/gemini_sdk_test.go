package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genai"

	"github.com/breakwater-dev/breakwater/lib/logtest"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// The official SDK reads misses, exact and semantic hits and replayed
// streams; a stream miss is stored and served to stream and JSON requests.
func TestGeminiSDKHitsAndStreamReplay(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	c := g.client("key-a")
	const q = "What is the capital of France?"
	want := geminiFlash + " says: " + q

	text, outcome, err := g.generate(c, geminiFlash, q)
	if err != nil || text != want || outcome != OutcomeMiss {
		t.Fatalf("first call: %q %s %v", text, outcome, err)
	}
	text, outcome, err = g.generate(c, geminiFlash, q)
	if err != nil || text != want || outcome != OutcomeHitExact {
		t.Fatalf("repeat: %q %s %v, want an exact hit", text, outcome, err)
	}
	// The JSON answer, replayed as a stream the SDK reads chunk by chunk.
	text, chunks, outcome, err := g.stream(c, geminiFlash, q)
	if err != nil || text != want || outcome != OutcomeHitExact || chunks < 2 {
		t.Fatalf("stream of a cached answer: %q in %d chunks, %s, %v", text, chunks, outcome, err)
	}
	g.waitIndexed(1)
	text, outcome, err = g.generate(c, geminiFlash, "What is the capital of France")
	if err != nil || text != want || outcome != OutcomeHitSemantic {
		t.Fatalf("paraphrase: %q %s %v, want a semantic hit", text, outcome, err)
	}
	if n := len(g.api.callsTo("")); n != 1 {
		t.Errorf("upstream called %d times, want 1", n)
	}

	// A stream miss is relayed, stored, then replayed and served as JSON.
	const q2 = "Name three rivers in Europe, please."
	want2 := geminiFlash + " says: " + q2
	text, chunks, outcome, err = g.stream(c, geminiFlash, q2)
	if err != nil || text != want2 || outcome != OutcomeMiss || chunks != len(words(want2)) {
		t.Fatalf("stream miss: %q in %d chunks, %s, %v", text, chunks, outcome, err)
	}
	g.waitStreams()
	text, chunks, outcome, err = g.stream(c, geminiFlash, q2)
	if err != nil || text != want2 || outcome != OutcomeHitExact || chunks < 2 {
		t.Fatalf("stream replay: %q in %d chunks, %s, %v", text, chunks, outcome, err)
	}
	text, outcome, err = g.generate(c, geminiFlash, q2)
	if err != nil || text != want2 || outcome != OutcomeHitExact {
		t.Fatalf("JSON from a stored stream: %q %s %v", text, outcome, err)
	}
	if n := len(g.api.callsTo("")); n != 2 {
		t.Errorf("upstream called %d times, want 2", n)
	}
	if q := g.api.callsTo("")[1].query; q != "alt=sse" {
		t.Errorf("stream sent upstream with query %q, want alt=sse", q)
	}
}

// A RESOURCE_EXHAUSTED storm whose RetryInfo asks for a delay is absorbed:
// the SDK sees one answer, each retry waited what the API asked for.
func TestGeminiSDKRetryDelayStorm(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	const delay = 150 * time.Millisecond
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if n <= 3 {
			geminiRefuse(w, 429, strings.Replace(geminiPerMinute, `"21.5s"`, `"0.15s"`, 1))
			return true
		}
		return false
	}
	resp, err := g.client("key-a").Models.GenerateContent(context.Background(), geminiFlash, genai.Text("Hello there"), zeroTemp())
	if err != nil {
		t.Fatalf("the storm reached the SDK: %v", err)
	}
	if resp.Text() != geminiFlash+" says: Hello there" || resp.SDKHTTPResponse.Headers.Get(HeaderAttempts) != "4" {
		t.Errorf("answer %q after %s attempts", resp.Text(), resp.SDKHTTPResponse.Headers.Get(HeaderAttempts))
	}
	calls := g.api.callsTo(geminiFlash)
	if len(calls) != 4 {
		t.Fatalf("%d upstream calls, want 4", len(calls))
	}
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].at.Sub(calls[i-1].at); gap < delay {
			t.Errorf("retry %d came %s after the refusal, want at least the %s of retryDelay", i, gap, delay)
		}
	}
}

// A per-day quota is not retried on the same target: Pro falls back to
// Flash at once; a model with nowhere to go fails fast naming the quota.
func TestGeminiSDKDailyQuotaNotRetried(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	// A short retryDelay, so that only the quota's kind (per day) can be
	// why it is not retried: a long one would not fit the deadline anyway.
	perDay := strings.Replace(geminiPerDay, `"43s"`, `"0.05s"`, 1)
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if c.model == geminiPro || strings.Contains(c.lastUser(), "flash quota") {
			geminiRefuse(w, 429, perDay)
			return true
		}
		return false
	}
	c := g.client("key-a")
	start := time.Now()
	text, _, err := g.generate(c, geminiPro, "Plan my day")
	if err != nil || text != geminiFlash+" says: Plan my day" {
		t.Fatalf("Pro on a spent daily quota: %q, %v; want Flash's answer", text, err)
	}
	if n := len(g.api.callsTo(geminiPro)); n != 1 {
		t.Errorf("Pro called %d times on a spent daily quota, want 1", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("fallback took %s", d)
	}

	start = time.Now()
	_, err = c.Models.GenerateContent(context.Background(), geminiFlash, genai.Text("flash quota"), zeroTemp())
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want a genai.APIError", err)
	}
	if apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" || !strings.Contains(apiErr.Message, "GenerateRequestsPerDayPerProjectPerModel-FreeTier") {
		t.Errorf("error = %+v, want 429 RESOURCE_EXHAUSTED naming the daily quota", apiErr)
	}
	var flash int
	for _, call := range g.api.callsTo(geminiFlash) {
		if strings.Contains(call.lastUser(), "flash quota") {
			flash++
		}
	}
	if flash != 1 {
		t.Errorf("Flash called %d times on a spent daily quota, want 1", flash)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("failing took %s, want fast", d)
	}
}

// 503 UNAVAILABLE ("the model is overloaded") falls back to Flash, the
// model rewritten in the path, for JSON and streams alike.
func TestGeminiSDKUnavailableFallsBackToFlash(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if c.model == geminiPro {
			geminiRefuse(w, 503, geminiOverloaded)
			return true
		}
		return false
	}
	c := g.client("key-a")
	resp, err := c.Models.GenerateContent(context.Background(), geminiPro, genai.Text("Summarise the news"), zeroTemp())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != geminiFlash+" says: Summarise the news" || resp.SDKHTTPResponse.Headers.Get(HeaderUpstream) != "gemini/"+geminiFlash {
		t.Errorf("answer %q from %s, want Flash's", resp.Text(), resp.SDKHTTPResponse.Headers.Get(HeaderUpstream))
	}
	if len(g.api.callsTo(geminiPro)) == 0 || len(g.api.callsTo(geminiFlash)) != 1 {
		t.Errorf("calls: pro %d, flash %d", len(g.api.callsTo(geminiPro)), len(g.api.callsTo(geminiFlash)))
	}
	text, _, _, err := g.stream(c, geminiPro, "Stream the news")
	if err != nil || text != geminiFlash+" says: Stream the news" {
		t.Errorf("stream: %q, %v; want Flash's", text, err)
	}
	if got := g.api.callsTo(geminiFlash); got[len(got)-1].method != "streamGenerateContent" || got[len(got)-1].query != "alt=sse" {
		t.Errorf("fallback stream went to %s?%s", got[len(got)-1].method, got[len(got)-1].query)
	}
}

// A stream cut by Pro is resumed on Flash; a stream cut on every target
// ends with an error the SDK raises; neither is stored.
func TestGeminiSDKCutStream(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if c.method != "streamGenerateContent" {
			return false
		}
		if c.model == geminiPro || strings.Contains(toJSON(c.body), "always cut") {
			geminiStreamAnswer(w, c.model, c.answer(), 2)
			return true
		}
		return false
	}
	c := g.client("key-a")
	text, _, _, err := g.stream(c, geminiPro, "Tell me a long story")
	if err != nil {
		t.Fatalf("resumed stream: %v", err)
	}
	partial := strings.Join(words(geminiPro + " says: Tell me a long story")[:2], "")
	if !strings.HasPrefix(text, partial) || len(text) <= len(partial) {
		t.Errorf("text %q does not continue %q", text, partial)
	}
	flash := g.api.callsTo(geminiFlash)
	if len(flash) != 1 {
		t.Fatalf("flash called %d times, want 1 (the resumption)", len(flash))
	}
	contents, _ := flash[0].body["contents"].([]any)
	if len(contents) != 3 || !strings.Contains(toJSON(contents[1]), partial) {
		t.Errorf("resume request contents = %s, want the partial answer as a model turn", toJSON(contents))
	}

	_, _, _, err = g.stream(c, geminiFlash, "always cut this one")
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 || !strings.Contains(apiErr.Message, "interrupted") {
		t.Fatalf("err = %v, want the SDK to raise the interruption", err)
	}
	g.waitStreams()
	before := len(g.api.callsTo(""))
	if _, _, outcome, _ := g.stream(c, geminiPro, "Tell me a long story"); outcome != OutcomeMiss {
		t.Errorf("a resumed stream was stored: %s", outcome)
	}
	if len(g.api.callsTo("")) == before {
		t.Error("a cut stream was served from the cache")
	}
}

// Two keys never share an entry: not exact, not semantic, not a stream.
func TestGeminiSDKKeysNeverShare(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if c.method == "generateContent" {
			writeJSON(w, 200, geminiAnswer(c.model, "for "+c.key+": "+c.lastUser(), "STOP"))
			return true
		}
		return false
	}
	a, b := g.client("key-a"), g.client("key-b")
	const q = "What is my account balance?"
	if text, _, err := g.generate(a, geminiFlash, q); err != nil || text != "for key-a: "+q {
		t.Fatalf("a: %q %v", text, err)
	}
	g.waitIndexed(1)
	for _, ask := range []string{"What is my account balance", q} {
		text, outcome, err := g.generate(b, geminiFlash, ask)
		if err != nil || !strings.HasPrefix(text, "for key-b: ") {
			t.Errorf("b asking %q got %q (%s, %v): another key's entry", ask, text, outcome, err)
		}
		text, _, _, err = g.stream(b, geminiFlash, ask)
		if err != nil || strings.Contains(text, "key-a") {
			t.Errorf("b streaming %q got %q, %v", ask, text, err)
		}
	}
	if text, outcome, _ := g.generate(a, geminiFlash, q); text != "for key-a: "+q || outcome != OutcomeHitExact {
		t.Errorf("a's own repeat: %q %s", text, outcome)
	}
}

// A key given in the URL reaches the upstream as x-goog-api-key, is the
// same tenant as that header, and appears in no log line (debug included),
// response, error, /stats or metric.
func TestGeminiKeyInURLNotLogged(t *testing.T) {
	const secret = "AIzaSy-very-secret-url-key"
	var logs logtest.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	closed := httptest.NewServer(http.NotFoundHandler())
	down := closed.URL
	closed.Close() // connection refused: the caller's error names the URL
	g := newGeminiEnv(t, envOptions{
		proxy: func(o *Options) {
			o.Logger = logger
			o.Metrics = NewMetrics(reg)
			o.Passthrough = mustURL(t, down+"/v1") // OpenAI pass-through fails: its error names the URL
		},
		caller: func(o *upstream.Options) {
			o.Logger = logger
			o.Upstreams = append(o.Upstreams, upstream.Upstream{Name: "down", BaseURL: down + "/v1beta"})
			o.Routes = append(o.Routes, upstream.Route{Name: "gemini-down", Targets: []upstream.Target{{Upstream: "down"}}})
		},
	})
	var seen strings.Builder
	do := func(method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, g.front.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen.Write(b)
		for k, v := range resp.Header {
			seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		return resp
	}
	question := `{"contents":[{"role":"user","parts":[{"text":"Where is my parcel?"}]}],"generationConfig":{"temperature":0}}`
	if r := do("POST", "/v1beta/models/"+geminiFlash+":generateContent?key="+secret, question); r.StatusCode != 200 || r.Header.Get(HeaderCache) != OutcomeMiss {
		t.Fatalf("miss: %d %s", r.StatusCode, r.Header.Get(HeaderCache))
	}
	// The same key in the header is the same tenant.
	if r := do("POST", "/v1beta/models/"+geminiFlash+":generateContent", question, "X-Goog-Api-Key", secret); r.Header.Get(HeaderCache) != OutcomeHitExact {
		t.Errorf("the header key missed the URL key's entry: %s", r.Header.Get(HeaderCache))
	}
	do("POST", "/v1beta/models/"+geminiFlash+":streamGenerateContent?alt=sse&key="+secret,
		`{"contents":[{"parts":[{"text":"Stream it"}]}],"generationConfig":{"temperature":0}}`)
	do("POST", "/v1/models/"+geminiFlash+":countTokens?key="+secret, question)
	do("POST", "/v1beta/models/gemini-down:generateContent?key="+secret, question)
	do("POST", "/v1beta/models/"+geminiFlash+":generateContent?key="+secret, `{"contents": nope}`)
	do("POST", "/v1beta/models/"+geminiFlash+":generateContent?key="+secret+"&key=other", question)
	do("GET", "/v1beta/models/"+geminiFlash+"?key="+secret, "")
	do("GET", "/v1beta/models?key="+secret, "")
	do("GET", "/v1/models/"+geminiFlash+"?key="+secret, "")
	do("POST", "/v1/files?key="+secret, "{}")
	do("GET", "/stats", "")
	g.waitStreams()

	for _, c := range g.api.callsTo("") {
		if strings.Contains(c.query, secret) || c.key != secret {
			t.Errorf("upstream call %s:%s got query %q, key header %q", c.model, c.method, c.query, c.key)
		}
	}
	if len(g.api.callsTo("")) < 3 {
		t.Errorf("%d upstream calls, want the miss, the stream and countTokens", len(g.api.callsTo("")))
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("a log line holds the key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"request"`) {
		t.Errorf("no request lines logged:\n%s", logs.String())
	}
	if strings.Contains(seen.String(), secret) {
		t.Errorf("a response holds the key:\n%s", seen.String())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(g.server.opts.Metrics.Requests); n == 0 {
		t.Error("no request metrics recorded")
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), secret) {
					t.Errorf("metric %s label %s holds the key", mf.GetName(), l.GetName())
				}
			}
		}
	}
}

// Other Gemini methods pass through, uncached, to the model's route.
func TestGeminiSDKCountTokensPassesThrough(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	c := g.client("key-a")
	for range 2 {
		resp, err := c.Models.CountTokens(context.Background(), geminiFlash, genai.Text("How many tokens?"), nil)
		if err != nil || resp.TotalTokens != 7 {
			t.Fatalf("countTokens: %+v, %v", resp, err)
		}
	}
	calls := g.api.callsTo(geminiFlash)
	if len(calls) != 2 || calls[0].method != "countTokens" || calls[0].key != "key-a" {
		t.Errorf("upstream calls = %+v, want two countTokens with the client's key", calls)
	}
}

// A Gemini request naming no model goes to the Gemini upstream as it is,
// its URL key moved into x-goog-api-key.
func TestGeminiModelListPassesThrough(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	resp, err := http.Get(g.front.URL + "/v1beta/models?pageSize=5&key=list-key")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "models/"+geminiFlash) || resp.Header.Get(HeaderCache) != OutcomeBypass {
		t.Fatalf("list: %d %s %s", resp.StatusCode, resp.Header.Get(HeaderCache), b)
	}
	calls := g.api.callsTo("")
	if len(calls) != 1 || calls[0].method != "list" || calls[0].query != "pageSize=5" || calls[0].key != "list-key" {
		t.Errorf("upstream saw %+v, want the list with pageSize=5 and the key in x-goog-api-key", calls)
	}
}

// Refusals and bad requests reach the SDK as its APIError, in Google's
// shape; an answer stopped for SAFETY is passed on and never stored.
func TestGeminiSDKErrorsAndUnstored(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		switch {
		case strings.Contains(c.lastUser(), "unsafe"):
			writeJSON(w, 200, geminiAnswer(c.model, "", "SAFETY"))
		case strings.Contains(c.lastUser(), "invalid"):
			geminiRefuse(w, 400, `{"error":{"code":400,"message":"Invalid JSON payload received.","status":"INVALID_ARGUMENT"}}`)
		default:
			return false
		}
		return true
	}
	c := g.client("key-a")
	for range 2 {
		if _, outcome, err := g.generate(c, geminiFlash, "something unsafe"); err != nil || outcome != OutcomeMiss {
			t.Errorf("SAFETY answer: %s, %v; want a miss every time", outcome, err)
		}
	}
	if n := len(g.api.callsTo(geminiFlash)); n != 2 {
		t.Errorf("upstream called %d times for a SAFETY answer asked twice, want 2", n)
	}
	_, _, err := g.generate(c, geminiFlash, "invalid please")
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Status != "INVALID_ARGUMENT" {
		t.Errorf("upstream 400: %v, want it passed through", err)
	}
	// The sidecar's own refusals are Google-shaped too.
	r := g.post("/v1beta/models/"+geminiFlash+":generateContent", `{"contents": []}`, "X-Goog-Api-Key", "key-a")
	if r.status != 400 || !strings.Contains(string(r.body), `"status":"INVALID_ARGUMENT"`) {
		t.Errorf("empty contents: %d %s", r.status, r.body)
	}
}

// Concurrent identical Gemini requests share one upstream call.
func TestGeminiSDKCoalesces(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	release := make(chan struct{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		<-release
		return false
	}
	c := g.client("key-a")
	var wg sync.WaitGroup
	texts := make([]string, 4)
	for i := range texts {
		wg.Go(func() { texts[i], _, _ = g.generate(c, geminiFlash, "Same question") })
	}
	g.waitWaiters(4)
	close(release)
	wg.Wait()
	for _, text := range texts {
		if text != geminiFlash+" says: Same question" {
			t.Errorf("answer %q", text)
		}
	}
	if n := len(g.api.callsTo("")); n != 1 {
		t.Errorf("%d upstream calls for 4 identical requests, want 1", n)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// One key's spent quota never slows another key: the refusal's retryDelay
// holds the first key's requests only.
func TestGeminiRateLimitStaysWithItsKey(t *testing.T) {
	g := newGeminiEnv(t, envOptions{})
	g.api.handle = func(w http.ResponseWriter, c geminiCall, n int) bool {
		if c.key == "key-a" {
			geminiRefuse(w, 429, strings.Replace(geminiPerMinute, `"21.5s"`, `"4s"`, 1))
			return true
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := g.client("key-a").Models.GenerateContent(ctx, geminiFlash, genai.Text("A asks"), zeroTemp())
		done <- err
	}()
	// Wait until the caller has read key-a's refusal (its hold is in place).
	refused := func() bool {
		for _, m := range g.server.opts.Caller.Snapshot() {
			for _, ts := range m.Targets {
				if ts.Name == "gemini/"+geminiFlash && ts.RateLimited > 0 {
					return true
				}
			}
		}
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for !refused() {
		if time.Now().After(deadline) {
			t.Fatal("key-a's refusal was never counted")
		}
		time.Sleep(2 * time.Millisecond)
	}
	start := time.Now()
	text, _, err := g.generate(g.client("key-b"), geminiFlash, "B asks")
	if err != nil || text != geminiFlash+" says: B asks" {
		t.Fatalf("key-b: %q, %v", text, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("key-b waited %s behind key-a's 4s retryDelay", d)
	}
	if err := <-done; err == nil {
		t.Error("key-a was answered although its quota was spent")
	}
}
