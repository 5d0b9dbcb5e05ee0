package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := postErr(t, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// postErr is post for goroutines other than the test's, which must not
// call t.Fatal (testing: "FailNow must be called from the goroutine running
// the test"): the caller reports the error with t.Error.
func postErr(t *testing.T, url, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func chatBody(q string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":    "gpt-test",
		"stream":   stream,
		"messages": []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": q}},
	})
	return string(b)
}

func TestChat(t *testing.T) {
	srv := httptest.NewServer(NewHandler(Options{}))
	defer srv.Close()
	type completion struct {
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	for _, q := range []string{"How do I sort a map in Go?", "What is the capital of France?"} {
		t.Run(q, func(t *testing.T) {
			resp, b := post(t, srv.URL+"/v1/chat/completions", chatBody(q, false))
			if got, want := resp.StatusCode, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, b)
			}
			var c completion
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			if len(c.Choices) != 1 {
				t.Fatalf("choices = %d, want 1", len(c.Choices))
			}
			if got, want := c.Choices[0].Message.Content, Answer(q); got != want {
				t.Errorf("content = %q, want %q", got, want)
			}
			if !strings.Contains(c.Choices[0].Message.Content, q) {
				t.Errorf("answer %q does not contain the question", c.Choices[0].Message.Content)
			}
			if got, want := c.Choices[0].FinishReason, "stop"; got != want {
				t.Errorf("finish_reason = %q, want %q", got, want)
			}
			if got, want := c.Usage.Prompt, tokens("be brief")+tokens(q); got != want {
				t.Errorf("prompt_tokens = %d, want %d", got, want)
			}
			if got, want := c.Usage.Total, c.Usage.Prompt+c.Usage.Completion; got != want || c.Usage.Completion == 0 {
				t.Errorf("total_tokens = %d, want %d (completion %d)", got, want, c.Usage.Completion)
			}
		})
	}
}

func TestStream(t *testing.T) {
	s := New(Options{PerToken: time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	q := "Why is the sky blue?"
	resp, b := post(t, srv.URL+"/v1/chat/completions", chatBody(q, true))
	if got, want := resp.Header.Get("Content-Type"), "text/event-stream"; got != want {
		t.Fatalf("content-type = %q, want %q", got, want)
	}
	var content strings.Builder
	var events []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	finish := ""
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		events = append(events, data)
		if data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		content.WriteString(chunk.Choices[0].Delta.Content)
		if fr := chunk.Choices[0].FinishReason; fr != nil {
			finish = *fr
		}
	}
	if got, want := content.String(), Answer(q); got != want {
		t.Errorf("streamed content = %q, want %q", got, want)
	}
	if got, want := finish, "stop"; got != want {
		t.Errorf("finish_reason = %q, want %q", got, want)
	}
	if got, want := events[len(events)-1], "[DONE]"; got != want {
		t.Errorf("last event = %q, want %q", got, want)
	}
	if got, want := s.Stats().OK, int64(1); got != want {
		t.Errorf("stats ok = %d, want %d", got, want)
	}
}

func TestCapacity(t *testing.T) {
	s := New(Options{Capacity: 2, Latency: 300 * time.Millisecond, RetryAfter: 1500 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	const n = 5
	codes := make([]int, n)
	headers := make([]http.Header, n)
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, b, err := postErr(t, srv.URL+"/v1/chat/completions", chatBody("same question", false))
			if err != nil {
				t.Error(err)
				return
			}
			codes[i], headers[i], bodies[i] = resp.StatusCode, resp.Header, string(b)
		})
	}
	wg.Wait()
	ok, limited := 0, 0
	for i, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if got, want := headers[i].Get("Retry-After"), "2"; got != want {
				t.Errorf("Retry-After = %q, want %q", got, want)
			}
			if got, want := headers[i].Get("Retry-After-Ms"), "1500"; got != want {
				t.Errorf("retry-after-ms = %q, want %q", got, want)
			}
			if !strings.Contains(bodies[i], "model is at capacity") || !strings.Contains(bodies[i], `"type":"rate_limit_error"`) {
				t.Errorf("429 body = %s", bodies[i])
			}
		default:
			t.Errorf("status = %d, want 200 or 429", c)
		}
	}
	if got, want := ok, 2; got != want {
		t.Errorf("answered = %d, want %d", got, want)
	}
	st := s.Stats()
	if got, want := st.Calls, int64(n); got != want {
		t.Errorf("calls = %d, want %d", got, want)
	}
	if got, want := st.RateLimited, int64(limited); got != want {
		t.Errorf("rate_limited = %d, want %d", got, want)
	}
	if got, want := st.InFlightPeak, int64(2); got != want {
		t.Errorf("in_flight_peak = %d, want %d", got, want)
	}
	if got, want := st.InFlight, int64(0); got != want {
		t.Errorf("in_flight = %d, want %d", got, want)
	}
}

func TestErrorRate(t *testing.T) {
	s := New(Options{ErrorRate: 1})
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, b := post(t, srv.URL+"/v1/chat/completions", chatBody("q", false))
	if got, want := resp.StatusCode, http.StatusServiceUnavailable; got != want {
		t.Fatalf("status = %d, want %d", got, want)
	}
	if !strings.Contains(string(b), `"error"`) {
		t.Errorf("body = %s, want an OpenAI error", b)
	}
	if got, want := s.Stats().Errors, int64(1); got != want {
		t.Errorf("errors = %d, want %d", got, want)
	}
}

func TestLatency(t *testing.T) {
	for _, dist := range []string{DistExponential, DistLognormal, DistUniform} {
		t.Run(dist, func(t *testing.T) {
			s := New(Options{Latency: 10 * time.Millisecond, Jitter: 20 * time.Millisecond, Dist: dist})
			var sum time.Duration
			const n = 2000
			for range n {
				_, d := s.draw()
				if d < 10*time.Millisecond {
					t.Fatalf("draw %s below the base latency", d)
				}
				sum += d
			}
			mean := sum / n
			if mean < 25*time.Millisecond || mean > 35*time.Millisecond {
				t.Errorf("mean latency = %s, want about 30ms", mean)
			}
		})
	}
}

func TestEmbeddingsModelsStats(t *testing.T) {
	s := New(Options{Dimension: 16, Models: []string{"a", "b"}})
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, b := post(t, srv.URL+"/v1/embeddings", `{"model":"e","input":["hello","world","hello"]}`)
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Fatalf("embeddings status = %d: %s", got, b)
	}
	var emb struct {
		Data []struct{ Embedding []float32 } `json:"data"`
	}
	if err := json.Unmarshal(b, &emb); err != nil {
		t.Fatal(err)
	}
	if got, want := len(emb.Data), 3; got != want {
		t.Fatalf("vectors = %d, want %d", got, want)
	}
	var norm float64
	for _, x := range emb.Data[0].Embedding {
		norm += float64(x) * float64(x)
	}
	if got, want := len(emb.Data[0].Embedding), 16; got != want {
		t.Errorf("dimension = %d, want %d", got, want)
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Errorf("norm² = %v, want 1", norm)
	}
	if got, want := emb.Data[2].Embedding[0], emb.Data[0].Embedding[0]; got != want {
		t.Errorf("equal texts got different vectors")
	}

	r, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct{ Data []struct{ ID string } }
	json.NewDecoder(r.Body).Decode(&models)
	r.Body.Close()
	if got, want := len(models.Data), 2; got != want || models.Data[1].ID != "b" {
		t.Errorf("models = %+v, want a and b", models.Data)
	}

	r, err = http.Get(srv.URL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st Stats
	json.NewDecoder(r.Body).Decode(&st)
	r.Body.Close()
	if got, want := st, (Stats{Calls: 1, OK: 1, InFlightPeak: 1, Distinct: 1, PromptTokens: 3}); got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
}

// TestCapacitySteps: the capacity follows the steps, counted from the first
// call.
func TestCapacitySteps(t *testing.T) {
	s := New(Options{Capacity: 0, Latency: 200 * time.Millisecond,
		Steps: []Step{{After: 0, Capacity: 1}, {After: time.Hour, Capacity: 3}}})
	srv := httptest.NewServer(s)
	defer srv.Close()
	codes := make([]int, 3)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			resp, _, err := postErr(t, srv.URL+"/v1/chat/completions", chatBody("q", false))
			if err != nil {
				t.Error(err)
				return
			}
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		}
	}
	if ok != 1 || s.Stats().RateLimited != 2 {
		t.Errorf("answered %d, refused %d of 3 at once under a step to capacity 1; want 1 and 2", ok, s.Stats().RateLimited)
	}
	if got, want := s.capacity(), 1; got != want {
		t.Errorf("capacity before the second step = %d, want %d", got, want)
	}
	s.start = s.start.Add(-time.Hour)
	if got, want := s.capacity(), 3; got != want {
		t.Errorf("capacity after the second step = %d, want %d", got, want)
	}
}

// TestAbandonedCallKeepsItsSlot: a client that goes away does not free the
// model, which finishes the answer anyway (as a provider does); a retry of
// the same request (same X-Request-ID) is not counted as a distinct one.
func TestAbandonedCallKeepsItsSlot(t *testing.T) {
	s := New(Options{Capacity: 1, Latency: 300 * time.Millisecond})
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody("q", false)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Request-ID", "req-1")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for s.Stats().InFlight != 1 {
		runtime.Gosched()
	}
	cancel()
	<-done
	for s.Stats().Abandoned != 1 {
		runtime.Gosched()
	}
	if got := s.Stats().InFlight; got != 1 {
		t.Errorf("in flight after the client left = %d, want 1 (the model is still working)", got)
	}
	// The same request again (a proxy's retry) finds the model busy.
	r2, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatBody("q", false)))
	r2.Header.Set("X-Request-ID", "req-1")
	resp, err := http.DefaultClient.Do(r2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status while the abandoned answer is made = %d, want 429", resp.StatusCode)
	}
	for s.Stats().InFlight != 0 {
		runtime.Gosched()
	}
	if st := s.Stats(); st.Distinct != 1 || st.Calls != 2 {
		t.Errorf("calls %d, distinct %d; want 2 and 1", st.Calls, st.Distinct)
	}
}
