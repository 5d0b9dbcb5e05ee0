package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// Streaming benchmarks (issue 5). The direct and proxied figures of one
// benchmark come from interleaved requests in the same loop, so load on the
// machine hits both alike; compare them as a difference or a ratio.

// streamBody is a stream request for question.
func streamBody(question string) string {
	return `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + quote(question) + `}]}`
}

// openStream posts a stream request and returns the response with its
// status checked.
func openStream(b *testing.B, client *http.Client, url, body string, headers ...string) *http.Response {
	b.Helper()
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	return resp
}

// ttfb is the time from sending a stream request to the first byte of its
// first event; the rest of the stream is read and checked to end in [DONE].
func ttfb(b *testing.B, client *http.Client, url, body string, headers ...string) time.Duration {
	b.Helper()
	t0 := time.Now()
	resp := openStream(b, client, url, body, headers...)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadByte(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	rest, err := io.ReadAll(br)
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		b.Fatalf("stream did not end with [DONE]: %q", rest)
	}
	return d
}

// pct is the p-th percentile (0..100) of lat, sorting it in place.
func pct(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, len(lat)*p/100)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// reportAdded reports p50 and p99 of direct and proxied latencies and what
// the proxy added to each.
func reportAdded(b *testing.B, prefix string, direct, proxied []time.Duration) {
	b.Helper()
	d50, d99 := pct(direct, 50), pct(direct, 99)
	p50, p99 := pct(proxied, 50), pct(proxied, 99)
	b.ReportMetric(micros(d50), prefix+"direct-p50-µs")
	b.ReportMetric(micros(d99), prefix+"direct-p99-µs")
	b.ReportMetric(micros(p50), prefix+"bw-p50-µs")
	b.ReportMetric(micros(p99), prefix+"bw-p99-µs")
	b.ReportMetric(micros(p50-d50), prefix+"added-p50-µs")
	b.ReportMetric(micros(p99-d99), prefix+"added-p99-µs")
}

// BenchmarkStreamTTFB: time to the first byte of the first event, directly
// from a streaming upstream and through Breakwater on a miss (no-cache,
// no-store: every op goes upstream). One op is one request of each.
func BenchmarkStreamTTFB(b *testing.B) {
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	body := streamBody("What is the capital of France?")
	// Warm the connections so no op pays for a dial.
	ttfb(b, client, e.upstream.URL+"/v1/chat/completions", body)
	ttfb(b, client, e.front.URL+"/v1/chat/completions", body, "Cache-Control", "no-cache, no-store")
	var direct, proxied []time.Duration
	for b.Loop() {
		direct = append(direct, ttfb(b, client, e.upstream.URL+"/v1/chat/completions", body))
		proxied = append(proxied, ttfb(b, client, e.front.URL+"/v1/chat/completions", body, "Cache-Control", "no-cache, no-store"))
	}
	reportAdded(b, "ttfb-", direct, proxied)
}

// BenchmarkStreamInterChunk: the upstream sends streamChunks content chunks
// streamGap apart; the gaps the client sees between consecutive content
// events, directly and through Breakwater (miss, no-cache, no-store). One op
// is one stream of each.
func BenchmarkStreamInterChunk(b *testing.B) {
	const (
		streamChunks = 25
		streamGap    = 2 * time.Millisecond
	)
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	answer := strings.TrimSpace(strings.Repeat("chunk ", streamChunks))
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		// Role chunk at once, then each content chunk after streamGap,
		// then the finish chunk and [DONE].
		streamAnswer(w, body, answer, streamGap)
		return true
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	body := streamBody("Tell me a long story")
	gaps := func(url string, headers ...string) []time.Duration {
		resp := openStream(b, client, url, body, headers...)
		defer resp.Body.Close()
		rd := newSSEReader(resp.Body)
		var at []time.Time
		for {
			ev, _, err := rd.next()
			if errors.Is(err, io.EOF) {
				b.Fatal("stream ended without [DONE]")
			}
			if err != nil {
				b.Fatal(err)
			}
			if ev.Done() {
				break
			}
			at = append(at, time.Now())
		}
		// Events: role, streamChunks contents, finish. The gaps that the
		// upstream spaced by streamGap are role→first content ... last.
		if len(at) != streamChunks+2 {
			b.Fatalf("got %d events, want %d", len(at), streamChunks+2)
		}
		out := make([]time.Duration, 0, streamChunks)
		for i := 1; i <= streamChunks; i++ {
			out = append(out, at[i].Sub(at[i-1]))
		}
		return out
	}
	// Warm the connections so no op pays for a dial.
	gaps(e.upstream.URL + "/v1/chat/completions")
	gaps(e.front.URL+"/v1/chat/completions", "Cache-Control", "no-cache, no-store")
	var direct, proxied []time.Duration
	for b.Loop() {
		direct = append(direct, gaps(e.upstream.URL+"/v1/chat/completions")...)
		proxied = append(proxied, gaps(e.front.URL+"/v1/chat/completions", "Cache-Control", "no-cache, no-store")...)
	}
	reportAdded(b, "gap-", direct, proxied)
}

// thousandTokens is a cached completion whose content is 1,000 word-sized
// pieces (about 1,000 tokens).
func thousandTokens() (answer string, completionJSON []byte) {
	answer = strings.Repeat("token ", 999) + "token."
	completionJSON, _ = json.Marshal(completion(map[string]any{"model": "gpt-test"}, answer))
	return answer, completionJSON
}

// BenchmarkReplay1000Tokens: replaying a cached 1,000-token answer as SSE,
// the replay function alone (into io.Discard) and a stream hit through the
// whole handler (httptest recorder, no network).
func BenchmarkReplay1000Tokens(b *testing.B) {
	answer, stored := thousandTokens()
	b.Run("func", func(b *testing.B) {
		var out bytes.Buffer
		if err := replay(&out, func() {}, stored, "chatcmpl-bwbench", 1700000000, true); err != nil {
			b.Fatal(err)
		}
		if got, want := bytes.Count(out.Bytes(), []byte("data: ")), 1000+4; got != want {
			b.Fatalf("replay sent %d events, want %d (role, 1000 pieces, finish, usage, [DONE])", got, want)
		}
		b.SetBytes(int64(out.Len()))
		b.ReportAllocs()
		for b.Loop() {
			if err := replay(io.Discard, func() {}, stored, "chatcmpl-bwbench", 1700000000, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("handler", func(b *testing.B) {
		e := newEnv(&testing.T{}, envOptions{})
		defer closeEnv(e)
		e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
			writeJSON(w, http.StatusOK, completion(body, answer))
			return true
		}
		const question = "Write a thousand tokens"
		if r := e.post("/v1/chat/completions", chat(question), "Authorization", "Bearer bench"); r.status != http.StatusOK {
			b.Fatalf("seeding: status %d", r.status)
		}
		h := e.server.Handler()
		body := streamBody(question)
		hit := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer bench")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Header().Get(HeaderCache) != OutcomeHitExact {
				b.Fatalf("status %d cache %q", rec.Code, rec.Header().Get(HeaderCache))
			}
			return rec
		}
		first := hit()
		if got, want := bytes.Count(first.Body.Bytes(), []byte("data: ")), 1000+4; got != want {
			b.Fatalf("stream hit sent %d events, want %d", got, want)
		}
		b.SetBytes(int64(first.Body.Len()))
		b.ReportAllocs()
		for b.Loop() {
			hit()
		}
	})
}
