package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func TestNewOpenAI(t *testing.T) {
	tests := []struct {
		name     string
		opts     OpenAIOptions
		wantErr  bool
		wantName string
		wantDim  int
	}{
		{name: "defaults", opts: OpenAIOptions{}, wantName: "openai:text-embedding-3-small"},
		{name: "dimensions", opts: OpenAIOptions{Model: "m", Dimensions: 256}, wantName: "openai:m:256", wantDim: 256},
		{name: "negative dimensions", opts: OpenAIOptions{Dimensions: -1}, wantErr: true},
		{name: "negative batch", opts: OpenAIOptions{BatchSize: -1}, wantErr: true},
		{name: "negative timeout", opts: OpenAIOptions{Timeout: -time.Second}, wantErr: true},
		{name: "base above max delay", opts: OpenAIOptions{BaseDelay: time.Minute}, wantErr: true},
		{name: "not a url", opts: OpenAIOptions{BaseURL: "localhost:11434"}, wantErr: true},
		{name: "ftp", opts: OpenAIOptions{BaseURL: "ftp://example.com/v1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewOpenAI(tt.opts)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NewOpenAI(%+v) = nil error, want one", tt.opts)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewOpenAI: %v", err)
			}
			if got, want := e.Name(), tt.wantName; got != want {
				t.Errorf("Name() = %q, want %q", got, want)
			}
			if got, want := e.Dimension(), tt.wantDim; got != want {
				t.Errorf("Dimension() = %d, want %d", got, want)
			}
			if got, want := e.batchSize, DefaultOpenAIBatchSize; got != want {
				t.Errorf("batch size = %d, want %d", got, want)
			}
			if got, want := e.timeout, DefaultOpenAITimeout; got != want {
				t.Errorf("timeout = %s, want %s", got, want)
			}
		})
	}
}

func TestOpenAIProbe(t *testing.T) {
	f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 12})
	e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"})
	if got := e.Dimension(); got != 0 {
		t.Errorf("Dimension() before Probe = %d, want 0", got)
	}
	dim, err := e.Probe(t.Context())
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if got, want := dim, 12; got != want {
		t.Errorf("Probe() = %d, want %d", got, want)
	}
	if got, want := e.Dimension(), 12; got != want {
		t.Errorf("Dimension() after Probe = %d, want %d", got, want)
	}
	if got, want := f.seen()[0].Dimensions, 0; got != want {
		t.Errorf("request dimensions = %d, want %d (not sent)", got, want)
	}
}

func TestOpenAIRequest(t *testing.T) {
	tests := []struct {
		name     string
		apiKey   string
		dims     int
		wantAuth string
	}{
		{name: "bearer key and dimensions", apiKey: "sk-test", dims: 8, wantAuth: "Bearer sk-test"},
		{name: "no key", wantAuth: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 4})
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1/", APIKey: tt.apiKey, Dimensions: tt.dims, Model: "m"})
			mustEmbed(t, e, []string{"a"})
			req := f.seen()[0]
			if got, want := req.Auth, tt.wantAuth; got != want {
				t.Errorf("Authorization = %q, want %q", got, want)
			}
			if got, want := req.Dimensions, tt.dims; got != want {
				t.Errorf("dimensions = %d, want %d", got, want)
			}
			if got, want := req.Model, "m"; got != want {
				t.Errorf("model = %q, want %q", got, want)
			}
		})
	}
}

func TestOpenAIBatching(t *testing.T) {
	tests := []struct {
		n, batch     int
		wantRequests int
	}{
		{n: 0, batch: 2, wantRequests: 0},
		{n: 1, batch: 2, wantRequests: 1},
		{n: 2, batch: 2, wantRequests: 1},
		{n: 5, batch: 2, wantRequests: 3},
		{n: 7, batch: 3, wantRequests: 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d/batch=%d", tt.n, tt.batch), func(t *testing.T) {
			f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 4})
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", BatchSize: tt.batch})
			texts := make([]string, tt.n)
			for i := range texts {
				texts[i] = "text " + strconv.Itoa(i)
			}
			vecs := mustEmbed(t, e, texts)
			for i, v := range vecs {
				if d := vecMaxAbsDiff(v, wantVector(t, texts[i], 4)); d > 0 {
					t.Errorf("vector %d is not the vector of %q", i, texts[i])
				}
			}
			reqs := f.seen()
			if got, want := len(reqs), tt.wantRequests; got != want {
				t.Fatalf("requests = %d, want %d", got, want)
			}
			var sent []string
			for _, r := range reqs {
				if len(r.Input) > tt.batch {
					t.Errorf("request of %d texts, batch size %d", len(r.Input), tt.batch)
				}
				sent = append(sent, r.Input...)
			}
			if got, want := strings.Join(sent, "|"), strings.Join(texts, "|"); got != want {
				t.Errorf("texts sent = %q, want %q", got, want)
			}
		})
	}
}

func TestOpenAIOutOfOrderIndex(t *testing.T) {
	texts := []string{"one", "two", "three"}
	order := []int{2, 0, 1}
	f := &fakeEmbeddings{Dim: 6}
	f.RespondFunc = func(_ int, w http.ResponseWriter, _ *http.Request, req fakeRequest) {
		b := fakeBody{Object: "list"}
		for _, i := range order {
			b.Data = append(b.Data, fakeDatum{Object: "embedding", Index: &i, Embedding: fakeVector(req.Input[i], 6)})
		}
		writeFakeJSON(w, http.StatusOK, b)
	}
	_, srv := newFakeServer(t, f)
	e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"})
	vecs := mustEmbed(t, e, texts)
	for i, text := range texts {
		if d := vecMaxAbsDiff(vecs[i], wantVector(t, text, 6)); d > 0 {
			t.Errorf("vector %d is not the vector of %q", i, text)
		}
	}
}

func TestOpenAIRetries(t *testing.T) {
	ok := func(f *fakeEmbeddings, w http.ResponseWriter, req fakeRequest) {
		writeFakeJSON(w, http.StatusOK, f.body(req))
	}
	tests := []struct {
		name         string
		respond      func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest)
		maxRetries   int
		wantAttempts int64
		wantStatus   int // 0: success
		minElapsed   time.Duration
	}{
		{
			name: "429 retry-after seconds then success",
			respond: func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest) {
				if n == 1 {
					w.Header().Set("Retry-After", "1")
					writeAPIError(w, http.StatusTooManyRequests)
					return
				}
				ok(f, w, req)
			},
			wantAttempts: 2,
			minElapsed:   900 * time.Millisecond,
		},
		{
			name: "429 retry-after-ms then success",
			respond: func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest) {
				if n == 1 {
					w.Header().Set("Retry-After-Ms", "150")
					writeAPIError(w, http.StatusTooManyRequests)
					return
				}
				ok(f, w, req)
			},
			wantAttempts: 2,
			minElapsed:   140 * time.Millisecond,
		},
		{
			name: "503 twice then success",
			respond: func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest) {
				if n <= 2 {
					writeAPIError(w, http.StatusServiceUnavailable)
					return
				}
				ok(f, w, req)
			},
			wantAttempts: 3,
		},
		{
			name: "502 plain-text body then success",
			respond: func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest) {
				if n == 1 {
					http.Error(w, "bad gateway", http.StatusBadGateway)
					return
				}
				ok(f, w, req)
			},
			wantAttempts: 2,
		},
		{
			name: "connection closed then success",
			respond: func(f *fakeEmbeddings, n int, w http.ResponseWriter, req fakeRequest) {
				if n == 1 {
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				ok(f, w, req)
			},
			wantAttempts: 2,
		},
		{
			name: "429 retry-after beyond max delay gives up",
			respond: func(_ *fakeEmbeddings, _ int, w http.ResponseWriter, _ fakeRequest) {
				w.Header().Set("Retry-After", "30")
				writeAPIError(w, http.StatusTooManyRequests)
			},
			wantAttempts: 1,
			wantStatus:   http.StatusTooManyRequests,
		},
		{
			name: "400 not retried",
			respond: func(_ *fakeEmbeddings, _ int, w http.ResponseWriter, _ fakeRequest) {
				writeAPIError(w, http.StatusBadRequest)
			},
			wantAttempts: 1,
			wantStatus:   http.StatusBadRequest,
		},
		{
			name: "401 not retried",
			respond: func(_ *fakeEmbeddings, _ int, w http.ResponseWriter, _ fakeRequest) {
				writeAPIError(w, http.StatusUnauthorized)
			},
			wantAttempts: 1,
			wantStatus:   http.StatusUnauthorized,
		},
		{
			name: "500 until retries run out",
			respond: func(_ *fakeEmbeddings, _ int, w http.ResponseWriter, _ fakeRequest) {
				writeAPIError(w, http.StatusInternalServerError)
			},
			maxRetries:   2,
			wantAttempts: 3,
			wantStatus:   http.StatusInternalServerError,
		},
		{
			name: "no retries when negative",
			respond: func(_ *fakeEmbeddings, _ int, w http.ResponseWriter, _ fakeRequest) {
				writeAPIError(w, http.StatusServiceUnavailable)
			},
			maxRetries:   -1,
			wantAttempts: 1,
			wantStatus:   http.StatusServiceUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEmbeddings{Dim: 4}
			f.RespondFunc = func(n int, w http.ResponseWriter, _ *http.Request, req fakeRequest) { tt.respond(f, n, w, req) }
			_, srv := newFakeServer(t, f)
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", MaxRetries: tt.maxRetries, MaxDelay: 2 * time.Second})
			start := time.Now()
			vecs, err := e.Embed(t.Context(), []string{"hello"})
			elapsed := time.Since(start)
			if got, want := f.calls.Load(), tt.wantAttempts; got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("took %s, want at least %s (Retry-After ignored?)", elapsed, tt.minElapsed)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("Embed: %v", err)
				}
				if d := vecMaxAbsDiff(vecs[0], wantVector(t, "hello", 4)); d > 0 {
					t.Errorf("wrong vector after retry")
				}
				return
			}
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("Embed error = %v, want *openai.APIError", err)
			}
			if got, want := apiErr.HTTPStatusCode, tt.wantStatus; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if vecs != nil {
				t.Errorf("vectors returned with an error")
			}
		})
	}
}

func TestOpenAIDeadline(t *testing.T) {
	tests := []struct {
		name         string
		respond      func(n int, w http.ResponseWriter, r *http.Request)
		timeout      time.Duration
		deadline     time.Duration
		maxAttempts  int64 // at most
		wantDeadline bool  // error wraps context.DeadlineExceeded
	}{
		{
			name:     "persistent 500",
			respond:  func(_ int, w http.ResponseWriter, _ *http.Request) { writeAPIError(w, http.StatusInternalServerError) },
			deadline: 300 * time.Millisecond,
		},
		{
			name: "retry-after beyond the deadline gives up at once",
			respond: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				writeAPIError(w, http.StatusTooManyRequests)
			},
			deadline:    300 * time.Millisecond,
			maxAttempts: 1,
		},
		{
			name: "stalled server",
			respond: func(_ int, _ http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			timeout:      100 * time.Millisecond,
			deadline:     350 * time.Millisecond,
			wantDeadline: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEmbeddings{Dim: 4}
			f.RespondFunc = func(n int, w http.ResponseWriter, r *http.Request, _ fakeRequest) { tt.respond(n, w, r) }
			_, srv := newFakeServer(t, f)
			e := newTestOpenAI(t, OpenAIOptions{
				BaseURL: srv.URL + "/v1", MaxRetries: 1000, Timeout: tt.timeout,
				BaseDelay: 10 * time.Millisecond, MaxDelay: 2 * time.Second,
			})
			ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
			defer cancel()
			start := time.Now()
			vecs, err := e.Embed(ctx, []string{"hello"})
			elapsed := time.Since(start)
			if err == nil || vecs != nil {
				t.Fatalf("Embed = %d vectors, %v; want an error", len(vecs), err)
			}
			if limit := tt.deadline + 150*time.Millisecond; elapsed > limit {
				t.Errorf("returned after %s, deadline %s", elapsed, tt.deadline)
			}
			if tt.maxAttempts > 0 && f.calls.Load() > tt.maxAttempts {
				t.Errorf("attempts = %d, want at most %d", f.calls.Load(), tt.maxAttempts)
			}
			if f.calls.Load() == 0 {
				t.Error("no request was made")
			}
			if tt.wantDeadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error = %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

func TestOpenAIPerRequestTimeoutRetried(t *testing.T) {
	f := &fakeEmbeddings{Dim: 4}
	f.RespondFunc = func(n int, w http.ResponseWriter, r *http.Request, req fakeRequest) {
		if n == 1 {
			<-r.Context().Done() // stall until the client gives up
			return
		}
		writeFakeJSON(w, http.StatusOK, f.body(req))
	}
	_, srv := newFakeServer(t, f)
	e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", Timeout: 100 * time.Millisecond})
	mustEmbed(t, e, []string{"hello"})
	if got, want := f.calls.Load(), int64(2); got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
}

func TestOpenAICancelMidRequest(t *testing.T) {
	f := &fakeEmbeddings{Dim: 4}
	f.RespondFunc = func(_ int, _ http.ResponseWriter, r *http.Request, _ fakeRequest) { <-r.Context().Done() }
	_, srv := newFakeServer(t, f)
	e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	vecs, err := e.Embed(ctx, []string{"hello"})
	if !errors.Is(err, context.Canceled) || vecs != nil {
		t.Errorf("Embed = %d vectors, %v; want context.Canceled", len(vecs), err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("cancel took %s to take effect", took)
	}
}

func TestOpenAIBadResponses(t *testing.T) {
	idx := func(i int) *int { return &i }
	texts := []string{"a", "b"}
	tests := []struct {
		name         string
		dims         int   // OpenAIOptions.Dimensions
		wantAttempts int64 // 0: 1
		respond      func(w http.ResponseWriter, req fakeRequest)
	}{
		{name: "malformed json", respond: func(w http.ResponseWriter, _ fakeRequest) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"embedding":[0.1,,0.2]}]}`))
		}},
		// A body cut short looks like a dropped connection: retried.
		{name: "truncated json", wantAttempts: 1 + DefaultOpenAIMaxRetries, respond: func(w http.ResponseWriter, _ fakeRequest) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"embedding":[0.1,`))
		}},
		{name: "not json", respond: func(w http.ResponseWriter, _ fakeRequest) {
			_, _ = w.Write([]byte(`<html>proxy error</html>`))
		}},
		{name: "wrong dimension", dims: 8, respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: fakeVector(req.Input[0], 4)},
				{Index: idx(1), Embedding: fakeVector(req.Input[1], 4)},
			}})
		}},
		{name: "dimensions disagree", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: fakeVector(req.Input[0], 4)},
				{Index: idx(1), Embedding: fakeVector(req.Input[1], 5)},
			}})
		}},
		{name: "fewer vectors than inputs", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{{Index: idx(0), Embedding: fakeVector(req.Input[0], 4)}}})
		}},
		{name: "more vectors than inputs", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: fakeVector("a", 4)},
				{Index: idx(1), Embedding: fakeVector("b", 4)},
				{Index: idx(2), Embedding: fakeVector("c", 4)},
			}})
		}},
		{name: "empty data", respond: func(w http.ResponseWriter, _ fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Object: "list", Data: []fakeDatum{}})
		}},
		{name: "no data field", respond: func(w http.ResponseWriter, _ fakeRequest) {
			writeFakeJSON(w, http.StatusOK, map[string]any{"object": "list"})
		}},
		{name: "missing index", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Embedding: fakeVector(req.Input[0], 4)},
				{Embedding: fakeVector(req.Input[1], 4)},
			}})
		}},
		{name: "index out of range", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: fakeVector(req.Input[0], 4)},
				{Index: idx(2), Embedding: fakeVector(req.Input[1], 4)},
			}})
		}},
		{name: "zero vector", respond: func(w http.ResponseWriter, req fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: fakeVector(req.Input[0], 4)},
				{Index: idx(1), Embedding: make([]float32, 4)},
			}})
		}},
		{name: "empty vectors", respond: func(w http.ResponseWriter, _ fakeRequest) {
			writeFakeJSON(w, http.StatusOK, fakeBody{Data: []fakeDatum{
				{Index: idx(0), Embedding: []float32{}},
				{Index: idx(1), Embedding: []float32{}},
			}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEmbeddings{Dim: 4}
			f.RespondFunc = func(_ int, w http.ResponseWriter, _ *http.Request, req fakeRequest) { tt.respond(w, req) }
			_, srv := newFakeServer(t, f)
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", Dimensions: tt.dims})
			vecs, err := e.Embed(t.Context(), texts)
			if err == nil || vecs != nil {
				t.Fatalf("Embed = %d vectors, %v; want an error", len(vecs), err)
			}
			if got, want := f.calls.Load(), max(tt.wantAttempts, 1); got != want {
				t.Errorf("attempts = %d, want %d", got, want)
			}
			if got, want := e.Dimension(), tt.dims; got != want {
				t.Errorf("Dimension() = %d after a bad answer, want %d", got, want)
			}
		})
	}
}

func TestOpenAIDimensionChangeIsAnError(t *testing.T) {
	f := &fakeEmbeddings{Dim: 4}
	f.RespondFunc = func(n int, w http.ResponseWriter, _ *http.Request, req fakeRequest) {
		if n > 1 {
			f.Dim = 6 // the model behind the endpoint was swapped
		}
		writeFakeJSON(w, http.StatusOK, f.body(req))
	}
	_, srv := newFakeServer(t, f)
	e := newProbedOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"})
	if _, err := e.Embed(t.Context(), []string{"x"}); err == nil {
		t.Fatal("Embed after a dimension change succeeded, want an error")
	}
	if got, want := e.Dimension(), 4; got != want {
		t.Errorf("Dimension() = %d, want %d", got, want)
	}
}

func TestOpenAIInvalidText(t *testing.T) {
	tests := []struct {
		name  string
		texts []string
	}{
		{name: "empty string", texts: []string{""}},
		{name: "empty among valid", texts: []string{"a", "", "b"}},
		{name: "invalid utf-8", texts: []string{"a", "\xff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := newFakeServer(t, &fakeEmbeddings{Dim: 4})
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"})
			vecs, err := e.Embed(t.Context(), tt.texts)
			if !errors.Is(err, ErrInvalidText) || vecs != nil {
				t.Errorf("Embed(%q) = %d vectors, %v; want ErrInvalidText", tt.texts, len(vecs), err)
			}
			if got := f.calls.Load(); got != 0 {
				t.Errorf("%d requests sent for invalid text, want 0", got)
			}
		})
	}
}

func TestNormalizeResponseVector(t *testing.T) {
	tests := []struct {
		name    string
		in      []float32
		want    []float32
		wantErr bool
	}{
		{name: "3-4-5", in: []float32{3, 4}, want: []float32{0.6, 0.8}},
		{name: "unit", in: []float32{0, 1, 0}, want: []float32{0, 1, 0}},
		{name: "zero", in: []float32{0, 0}, wantErr: true},
		{name: "empty", in: []float32{}, wantErr: true},
		{name: "nan", in: []float32{float32(math.NaN()), 1}, wantErr: true},
		{name: "inf", in: []float32{float32(math.Inf(1)), 1}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := append([]float32(nil), tt.in...)
			err := normalizeResponseVector(v)
			if got, want := err != nil, tt.wantErr; got != want {
				t.Fatalf("error = %v, want error %v", err, want)
			}
			if !tt.wantErr && vecMaxAbsDiff(v, tt.want) > 1e-7 {
				t.Errorf("normalize(%v) = %v, want %v", tt.in, v, tt.want)
			}
		})
	}
}

func TestRetryableOpenAIError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "429", err: &openai.APIError{HTTPStatusCode: 429}, want: true},
		{name: "500", err: &openai.APIError{HTTPStatusCode: 500}, want: true},
		{name: "529", err: &openai.RequestError{HTTPStatusCode: 529}, want: true},
		{name: "501", err: &openai.APIError{HTTPStatusCode: 501}, want: false},
		{name: "400", err: &openai.APIError{HTTPStatusCode: 400}, want: false},
		{name: "404 plain", err: &openai.RequestError{HTTPStatusCode: 404}, want: false},
		{name: "request timeout", err: context.DeadlineExceeded, want: true},
		{name: "eof", err: errors.New("x"), want: false},
		{name: "json", err: &json.SyntaxError{}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryableOpenAIError(tt.err); got != tt.want {
				t.Errorf("retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestOpenAIRetryAfterSharedRules: the embedder reads a server's wait by the
// rules the upstream caller uses (lib/retry). Before they were shared,
// the embedder ignored a fractional Retry-After and gave up on any wait above
// MaxDelay even when the deadline left room for it (hardening audit, "two
// retry loops").
func TestOpenAIRetryAfterSharedRules(t *testing.T) {
	tests := []struct {
		name, retryAfter string
		maxDelay         time.Duration
		minElapsed       time.Duration
	}{
		{"fractional seconds", "0.4", 2 * time.Second, 400 * time.Millisecond},
		{"above max delay within the deadline", "0.4", 50 * time.Millisecond, 400 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEmbeddings{Dim: 4}
			f.RespondFunc = func(n int, w http.ResponseWriter, _ *http.Request, req fakeRequest) {
				if n == 1 {
					w.Header().Set("Retry-After", tt.retryAfter)
					writeAPIError(w, http.StatusTooManyRequests)
					return
				}
				writeFakeJSON(w, http.StatusOK, f.body(req))
			}
			_, srv := newFakeServer(t, f)
			e := newTestOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", MaxDelay: tt.maxDelay, BaseDelay: time.Millisecond})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			if _, err := e.Embed(ctx, []string{"hello"}); err != nil {
				t.Fatalf("Embed: %v", err)
			}
			if d := time.Since(start); d < tt.minElapsed {
				t.Errorf("took %s, want at least %s (the server's wait was not honoured)", d, tt.minElapsed)
			}
			if got := f.calls.Load(); got != 2 {
				t.Errorf("attempts = %d, want 2", got)
			}
		})
	}
}
