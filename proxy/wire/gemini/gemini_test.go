package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/wire/gemini/geminitest"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Real refusals of the Gemini API (geminitest).
const (
	geminiPerMinute  = geminitest.PerMinute
	geminiPerDay     = geminitest.PerDay
	geminiLimitZero  = geminitest.LimitZero
	geminiOverloaded = geminitest.Overloaded
)

func TestClassifyGemini(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		want    upstream.Verdict
		quota   string // in Reason
		noQuota bool
	}{
		{name: "per minute", status: 429, body: geminiPerMinute,
			want: upstream.Verdict{Congestion: true, RetryAfter: 21500 * time.Millisecond}, quota: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
		{name: "per day", status: 429, body: geminiPerDay,
			want: upstream.Verdict{Congestion: true, RetryAfter: 43 * time.Second, NoRetrySameTarget: true}, quota: "daily quota GenerateRequestsPerDayPerProjectPerModel-FreeTier exhausted"},
		{name: "limit 0 in the message", status: 429, body: geminiLimitZero,
			want: upstream.Verdict{Congestion: true, NoRetrySameTarget: true}, quota: "limit 0"},
		{name: "quotaValue 0", status: 429, body: `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"InputTokensPerMinute","quotaValue":"0"}]}]}}`,
			want: upstream.Verdict{Congestion: true, NoRetrySameTarget: true}, quota: "quota InputTokensPerMinute has limit 0"},
		{name: "limit 0.5 is not zero", status: 429, body: `{"error":{"code":429,"message":"limit: 0.5, model: x","status":"RESOURCE_EXHAUSTED"}}`,
			want: upstream.Verdict{Congestion: true}},
		{name: "overloaded", status: 503, body: geminiOverloaded, want: upstream.Verdict{Congestion: true}, noQuota: true},
		{name: "not json", status: 502, body: `<html>bad gateway</html>`, want: upstream.Verdict{}, noQuota: true},
		{name: "internal", status: 500, body: `{"error":{"code":500,"message":"An internal error has occurred.","status":"INTERNAL"}}`, want: upstream.Verdict{}, noQuota: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := classifyGemini(c.status, http.Header{}, []byte(c.body))
			if v.Congestion != c.want.Congestion || v.RetryAfter != c.want.RetryAfter || v.NoRetrySameTarget != c.want.NoRetrySameTarget {
				t.Errorf("verdict = %+v, want %+v", v, c.want)
			}
			if c.quota != "" && !strings.Contains(v.Reason, c.quota) {
				t.Errorf("Reason = %q, want it to name %q", v.Reason, c.quota)
			}
			if c.noQuota && strings.Contains(v.Reason, "quota") {
				t.Errorf("Reason = %q names a quota", v.Reason)
			}
		})
	}
}

func TestGeminiErrorShape(t *testing.T) {
	status, body := geminiErrors.Error(429, "capacity_exceeded", "breakwater: every queue is full")
	var e struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]any
		}
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatal(err)
	}
	if status != 429 || e.Error.Code != 429 || e.Error.Status != "RESOURCE_EXHAUSTED" || e.Error.Message != "breakwater: every queue is full" {
		t.Errorf("error = %d %s", status, body)
	}
	if len(e.Error.Details) != 1 || e.Error.Details[0]["reason"] != "CAPACITY_EXCEEDED" {
		t.Errorf("details = %v, want an ErrorInfo with the code", e.Error.Details)
	}
	for status, want := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 499: "CANCELLED", 500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"} {
		if got := googleStatus(status); got != want {
			t.Errorf("googleStatus(%d) = %s, want %s", status, got, want)
		}
	}
	ev := geminiErrors.StreamError(errors.New("cut"))
	if !bytes.HasPrefix(ev, []byte("data: {\"error\":")) || !bytes.HasSuffix(ev, []byte("\n\n")) {
		t.Errorf("stream error event = %q", ev)
	}
}

// geminiChunks are the events of one streamed answer as the API frames them
// (CRLF): thoughts, then text in deltas with a signature on an empty last
// part, a citation, the finish and usage on the last event.
var geminiChunks = []string{
	`{"candidates":[{"content":{"parts":[{"text":"Thinking about","thought":true}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":" Paris.","thought":true}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"The capital "}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"is Paris."}],"role":"model"},"index":0,"citationMetadata":{"citationSources":[{"uri":"https://a"}]}}],"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"c2ln"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":6,"totalTokenCount":11},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
}

func feedAll(t *testing.T, a StreamAssembler, chunks []string) []byte {
	t.Helper()
	var relayed bytes.Buffer
	for _, c := range chunks {
		out, end, err := a.Feed(sseEvent{Data: []byte(c)}, []byte("data: "+c+"\r\n\r\n"), false)
		if err != nil {
			t.Fatalf("Feed(%s): %v", c, err)
		}
		if end {
			t.Fatal("a Gemini event ended the stream; only EOF does")
		}
		relayed.Write(out)
	}
	return relayed.Bytes()
}

func TestGeminiAssembler(t *testing.T) {
	a := newGeminiStream(false)
	relayed := feedAll(t, a, geminiChunks)
	if bytes.Contains(relayed, []byte("\r")) || bytes.Count(relayed, []byte("\n\n")) != len(geminiChunks) {
		t.Errorf("relayed events are not re-framed with LF:\n%q", relayed)
	}
	if !a.FinishedAtEOF() || !a.Complete() {
		t.Fatal("a stream ending in STOP is not finished and storable")
	}
	if got := a.Partial(); got != "The capital is Paris." {
		t.Errorf("Partial = %q (thoughts must be left out)", got)
	}
	body, err := a.Body()
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Candidates []struct {
			Content struct {
				Parts []map[string]any
				Role  string
			}
			FinishReason     string
			CitationMetadata struct{ CitationSources []map[string]any }
		}
		UsageMetadata struct{ TotalTokenCount int }
		ResponseID    string
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	c := r.Candidates[0]
	want := []map[string]any{{"text": "Thinking about Paris.", "thought": true}, {"text": "The capital is Paris.", "thoughtSignature": "c2ln"}}
	if len(c.Content.Parts) != 2 || c.Content.Parts[0]["text"] != want[0]["text"] || c.Content.Parts[0]["thought"] != true ||
		c.Content.Parts[1]["text"] != want[1]["text"] || c.Content.Parts[1]["thoughtSignature"] != "c2ln" {
		t.Errorf("parts = %v, want %v", c.Content.Parts, want)
	}
	if c.FinishReason != "STOP" || c.Content.Role != "model" || len(c.CitationMetadata.CitationSources) != 1 ||
		r.UsageMetadata.TotalTokenCount != 11 || r.ResponseID != "r1" {
		t.Errorf("assembled = %s", body)
	}
	// A function call is kept whole.
	b := newGeminiStream(false)
	feedAll(t, b, []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"lookup","args":{"q":"x"}}}],"role":"model"},"finishReason":"STOP","index":0}]}`})
	fb, _ := b.Body()
	if !bytes.Contains(fb, []byte(`"functionCall":{"name":"lookup","args":{"q":"x"}}`)) {
		t.Errorf("function call lost: %s", fb)
	}
	// An error object mid-stream cuts it.
	if _, _, err := newGeminiStream(false).Feed(sseEvent{Data: []byte(`{"error":{"code":500,"status":"INTERNAL"}}`)}, nil, false); err == nil {
		t.Error("an error event did not cut the stream")
	}
}

// Only STOP (and MAX_TOKENS when allowed) is stored; a stream without a
// finish reason is cut, one with any finish reason is over.
func TestGeminiFinished(t *testing.T) {
	answer := func(finish string) string {
		return `{"candidates":[{"content":{"parts":[{"text":"x"}],"role":"model"},"finishReason":"` + finish + `","index":0}]}`
	}
	for _, c := range []struct {
		body              string
		stored, maxTokens bool
	}{
		{answer("STOP"), true, false},
		{answer("MAX_TOKENS"), false, false},
		{answer("MAX_TOKENS"), true, true},
		{answer("SAFETY"), false, true},
		{answer("RECITATION"), false, true},
		{answer("BLOCKLIST"), false, true},
		{answer("PROHIBITED_CONTENT"), false, true},
		{answer("MALFORMED_FUNCTION_CALL"), false, true},
		{`{"promptFeedback":{"blockReason":"SAFETY"}}`, false, true},
		{`{"candidates":[{"content":{"role":"model"},"finishReason":"STOP","index":0}]}`, false, true},
		{`{"candidates":[]}`, false, true},
		{`{"error":{"code":500}}`, false, true},
		{`not json`, false, true},
	} {
		f := geminiFormat{storeMaxTokens: c.maxTokens}
		if got := f.Finished([]byte(c.body)); got != c.stored {
			t.Errorf("Finished(%s, maxTokens=%v) = %v, want %v", c.body, c.maxTokens, got, c.stored)
		}
	}
	cut := newGeminiStream(false)
	feedAll(t, cut, geminiChunks[:3])
	if cut.FinishedAtEOF() || cut.Complete() {
		t.Error("a stream without its finish reason counts as finished")
	}
	safety := newGeminiStream(false)
	feedAll(t, safety, []string{answer("SAFETY")})
	if !safety.FinishedAtEOF() || safety.Complete() {
		t.Error("a SAFETY stream must be over (not resumed) and not stored")
	}
	blocked := newGeminiStream(false)
	feedAll(t, blocked, []string{`{"promptFeedback":{"blockReason":"OTHER"}}`})
	if !blocked.FinishedAtEOF() || blocked.Complete() {
		t.Error("a blocked prompt must be over and not stored")
	}
}

// A replay is read back into the answer that was stored.
func TestGeminiReplayRoundTrip(t *testing.T) {
	a := newGeminiStream(false)
	feedAll(t, a, geminiChunks)
	stored, err := a.Body()
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	flushes := 0
	if err := geminiReplay(&w, func() { flushes++ }, stored); err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSuffix(w.String(), "\n\n"), "\n\n")
	if len(events) < 5 || flushes != len(events) {
		t.Fatalf("%d events, %d flushes:\n%s", len(events), flushes, w.String())
	}
	b := newGeminiStream(false)
	for _, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("event %q is not one data line", ev)
		}
		if err := b.add([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := b.Body()
	if !jsonEqual(t, stored, again) {
		t.Errorf("replayed answer differs:\nstored %s\nreplay %s", stored, again)
	}
	if !strings.Contains(events[len(events)-1], `"usageMetadata"`) || strings.Contains(events[0], `"usageMetadata"`) {
		t.Error("usageMetadata belongs on the last event only")
	}
}

func TestGeminiResume(t *testing.T) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"Tell me a story"}]}],"generationConfig":{"temperature":0}}`)
	a := newGeminiStream(false)
	feedAll(t, a, geminiChunks[:3])
	rb, err := geminiResume(body, a)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Contents []struct {
			Role  string
			Parts []struct{ Text string }
		}
		GenerationConfig map[string]any
	}
	if err := json.Unmarshal(rb, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Contents) != 3 || r.Contents[1].Role != "model" || r.Contents[1].Parts[0].Text != "The capital " ||
		r.Contents[2].Role != "user" || r.Contents[2].Parts[0].Text != resumeInstruction || r.GenerationConfig == nil {
		t.Errorf("resume body = %s", rb)
	}
	// Nothing generated yet: the request is sent again as it was.
	if rb, err := geminiResume(body, newGeminiStream(false)); err != nil || !bytes.Equal(rb, body) {
		t.Errorf("resume with no text = %s, %v", rb, err)
	}
	fc := newGeminiStream(false)
	feedAll(t, fc, []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}],"role":"model"},"index":0}]}`})
	if _, err := geminiResume(body, fc); !errors.Is(err, errNoResume) {
		t.Errorf("a function call was resumed: %v", err)
	}
}

func TestGeminiPaths(t *testing.T) {
	for path, want := range map[string][2]string{
		"/v1beta/models/gemini-2.5-flash:generateContent":       {"gemini-2.5-flash", "generateContent"},
		"/v1/models/gemini-3-pro-preview:streamGenerateContent": {"gemini-3-pro-preview", "streamGenerateContent"},
		"/v1beta/models/gemini-2.5-flash":                       {"gemini-2.5-flash", ""},
		"/v1beta/models":                                        {"", ""},
		"/v1beta/tunedModels/x:generateContent":                 {"", ""},
		"/v1beta/models/a/b:generateContent":                    {"", ""},
	} {
		m, meth := geminiTarget(geminiRest(path))
		if m != want[0] || meth != want[1] {
			t.Errorf("%s: model %q method %q, want %q %q", path, m, meth, want[0], want[1])
		}
	}
	f := geminiFormat{model: "gemini-3-pro-preview", version: "/v1", stream: true, query: url.Values{"alt": {"sse"}}}
	if got, want := f.upstreamPath("gemini-2.5-flash"), "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"; got != want {
		t.Errorf("upstreamPath = %q, want %q", got, want)
	}
	// Without a version (none parsed) the SDKs' default, /v1beta.
	if got, want := (geminiFormat{model: "m"}).upstreamPath("m"), "/v1beta/models/m:generateContent"; got != want {
		t.Errorf("upstreamPath without a version = %q, want %q", got, want)
	}
	path, body := f.ForModel("", []byte(`{"model":"models/gemini-3-pro-preview","contents":[]}`))("gemini-2.5-flash")
	if path != "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse" || !bytes.Contains(body, []byte(`"model":"models/gemini-2.5-flash"`)) {
		t.Errorf("ForModel = %s %s", path, body)
	}
	if _, body := f.ForModel("", []byte(`{"contents":[]}`))("x"); string(body) != `{"contents":[]}` {
		t.Errorf("a body without model was rewritten: %s", body)
	}
}

func TestMoveGeminiKey(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:streamGenerateContent?alt=sse&key=SECRET", nil)
	if err := moveGeminiKey(req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-Goog-Api-Key") != "SECRET" || strings.Contains(req.URL.String(), "SECRET") ||
		strings.Contains(req.RequestURI, "SECRET") || req.URL.Query().Get("alt") != "sse" {
		t.Errorf("after move: header %q, URL %s, RequestURI %s", req.Header.Get("X-Goog-Api-Key"), req.URL, req.RequestURI)
	}
	same := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?key=SECRET", nil)
	same.Header.Set("X-Goog-Api-Key", "SECRET")
	if err := moveGeminiKey(same); err != nil {
		t.Errorf("the same key twice: %v", err)
	}
	for _, target := range []string{"/v1beta/models/m:generateContent?key=A&key=B", "/v1beta/models/m:generateContent?key=A"} {
		r := httptest.NewRequest(http.MethodPost, target, nil)
		r.Header.Set("X-Goog-Api-Key", "B")
		if !strings.Contains(target, "key=B") {
			r.Header.Set("X-Goog-Api-Key", "OTHER")
		}
		err := moveGeminiKey(r)
		if err == nil {
			t.Errorf("%s: two different keys accepted", target)
			continue
		}
		for _, k := range []string{"A", "OTHER"} {
			if strings.Contains(err.Error(), "key "+k) || strings.Contains(err.Error(), k+" ") {
				t.Errorf("the error names a key: %v", err)
			}
		}
	}
	none := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent", io.NopCloser(strings.NewReader("")))
	if err := moveGeminiKey(none); err != nil || none.Header.Get("X-Goog-Api-Key") != "" {
		t.Errorf("no key: %v, header %q", err, none.Header.Get("X-Goog-Api-Key"))
	}
}
