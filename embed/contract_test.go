package embed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// contractTolerance is the largest per-component difference accepted between
// two vectors that must be "the same" (repeat calls, batch vs single): exact
// for the HTTP embedders, and room for float reassociation in a batched
// encoder.
const contractTolerance = 1e-5

// contractTexts are few on purpose: the suite also runs against the pure-Go
// encoder under -race. They differ in meaning so that their vectors differ.
var contractTexts = []string{
	"How do I reset my password?",
	"What is the capital of France?",
	"The quarterly report is due on Friday.",
	"Ünïcödé, emoji 🌊 and 漢字 are text too.",
}

// runEmbedderContract checks the Embedder contract. newEmbedder is called
// once; the subtests share the embedder, as callers do.
func runEmbedderContract(t *testing.T, newEmbedder func(t *testing.T) Embedder) {
	t.Helper()
	e := newEmbedder(t)

	t.Run("Name", func(t *testing.T) {
		name := e.Name()
		if name == "" {
			t.Fatal("Name() is empty")
		}
		if _, err := e.Embed(t.Context(), contractTexts[:1]); err != nil {
			t.Fatalf("Embed: %v", err)
		}
		if got := e.Name(); got != name {
			t.Errorf("Name() = %q after Embed, was %q", got, name)
		}
	})

	t.Run("Dimension", func(t *testing.T) {
		dim := e.Dimension()
		if dim <= 0 {
			t.Fatalf("Dimension() = %d, want > 0", dim)
		}
		vecs := mustEmbed(t, e, contractTexts)
		for i, v := range vecs {
			if got := len(v); got != dim {
				t.Errorf("len(vector %d) = %d, want Dimension() = %d", i, got, dim)
			}
		}
		if got := e.Dimension(); got != dim {
			t.Errorf("Dimension() = %d after Embed, was %d", got, dim)
		}
	})

	t.Run("Normalised", func(t *testing.T) {
		for i, v := range mustEmbed(t, e, contractTexts) {
			if n := vecNorm64(v); math.Abs(n-1) >= 1e-4 {
				t.Errorf("|vector %d| = %v, want 1", i, n)
			}
		}
	})

	t.Run("Deterministic", func(t *testing.T) {
		a := mustEmbed(t, e, contractTexts[1:2])
		b := mustEmbed(t, e, contractTexts[1:2])
		if d := vecMaxAbsDiff(a[0], b[0]); d > contractTolerance {
			t.Errorf("same text twice: vectors differ by up to %g", d)
		}
	})

	t.Run("DistinctTexts", func(t *testing.T) {
		vecs := mustEmbed(t, e, contractTexts[:2])
		if c := vecCosine(vecs[0], vecs[1]); c > 0.9999 {
			t.Errorf("vecCosine(%q, %q) = %v: different texts give the same vector", contractTexts[0], contractTexts[1], c)
		}
	})

	t.Run("BatchMatchesSingles", func(t *testing.T) {
		batch := mustEmbed(t, e, contractTexts)
		if got, want := len(batch), len(contractTexts); got != want {
			t.Fatalf("len(Embed(%d texts)) = %d", want, got)
		}
		for i, text := range contractTexts {
			single := mustEmbed(t, e, []string{text})
			if d := vecMaxAbsDiff(batch[i], single[0]); d > contractTolerance {
				t.Errorf("batch vector %d differs from Embed(%q) by up to %g (order not kept?)", i, text, d)
			}
		}
	})

	t.Run("Empty", func(t *testing.T) {
		for _, texts := range [][]string{nil, {}} {
			vecs, err := e.Embed(t.Context(), texts)
			if err != nil {
				t.Fatalf("Embed(%#v): %v", texts, err)
			}
			if got := len(vecs); got != 0 {
				t.Errorf("Embed(%#v) returned %d vectors, want 0", texts, got)
			}
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		start := time.Now()
		vecs, err := e.Embed(ctx, []string{"A text nobody embedded before cancelling."})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Embed(cancelled ctx) error = %v, want context.Canceled", err)
		}
		if vecs != nil {
			t.Errorf("Embed(cancelled ctx) returned %d vectors, want none", len(vecs))
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Embed(cancelled ctx) took %s", took)
		}
	})

	t.Run("InvalidUTF8", func(t *testing.T) {
		for _, texts := range [][]string{{"\xff\xfe"}, {contractTexts[0], "ok \xc3\x28 not"}} {
			vecs, err := e.Embed(t.Context(), texts)
			if !errors.Is(err, ErrInvalidText) {
				t.Errorf("Embed(%q) error = %v, want ErrInvalidText", texts, err)
			}
			if vecs != nil {
				t.Errorf("Embed(%q) returned vectors with an error", texts)
			}
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		want := mustEmbed(t, e, contractTexts)
		var wg sync.WaitGroup
		errs := make(chan error, len(contractTexts))
		for i, text := range contractTexts {
			wg.Go(func() {
				got, err := e.Embed(t.Context(), []string{text})
				switch {
				case err != nil:
					errs <- err
				case vecMaxAbsDiff(got[0], want[i]) > contractTolerance:
					errs <- fmt.Errorf("concurrent Embed(%q) differs from the serial one", text)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// mustEmbed embeds texts and checks that one vector came back per text.
func mustEmbed(t *testing.T, e Embedder, texts []string) [][]float32 {
	t.Helper()
	vecs, err := e.Embed(t.Context(), texts)
	if err != nil {
		t.Fatalf("Embed(%d texts): %v", len(texts), err)
	}
	if got, want := len(vecs), len(texts); got != want {
		t.Fatalf("Embed(%d texts) returned %d vectors", want, got)
	}
	return vecs
}

func vecNorm64(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func vecCosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot / (vecNorm64(a) * vecNorm64(b))
}

// vecMaxAbsDiff is the largest component difference, +Inf for different lengths.
func vecMaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func TestOpenAIContract(t *testing.T) {
	for _, dims := range []int{0, 24} {
		t.Run(fmt.Sprintf("dimensions=%d", dims), func(t *testing.T) {
			runEmbedderContract(t, func(t *testing.T) Embedder {
				_, srv := newFakeServer(t, &fakeEmbeddings{Dim: 16})
				return newProbedOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1", Dimensions: dims})
			})
		})
	}
}

func TestCachedContract(t *testing.T) {
	runEmbedderContract(t, func(t *testing.T) Embedder {
		_, srv := newFakeServer(t, &fakeEmbeddings{Dim: 16})
		return newTestCached(t, newProbedOpenAI(t, OpenAIOptions{BaseURL: srv.URL + "/v1"}), 1<<20)
	})
}

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings upstream for tests.
// By default it answers every request with fakeVector vectors of length Dim
// (or the request's "dimensions"), listed in reverse index order so that
// every test exercises reordering by "index".
type fakeEmbeddings struct {
	Dim int
	// RespondFunc, when set, answers request n (1-based) instead; it may
	// write f.body(req) for the default answer.
	RespondFunc func(n int, w http.ResponseWriter, r *http.Request, req fakeRequest)

	calls    atomic.Int64
	mu       sync.Mutex
	requests []fakeRequest
}

// fakeRequest is what the fake server saw of one request.
type fakeRequest struct {
	Input      []string `json:"input"`
	Model      string   `json:"model"`
	Dimensions int      `json:"dimensions"`
	Auth       string   `json:"-"`
}

type fakeDatum struct {
	Object    string    `json:"object"`
	Index     *int      `json:"index,omitempty"`
	Embedding []float32 `json:"embedding"`
}

type fakeBody struct {
	Object string      `json:"object"`
	Data   []fakeDatum `json:"data"`
	Model  string      `json:"model"`
}

// newFakeServer serves f on /v1/embeddings until the test ends.
func newFakeServer(t *testing.T, f *fakeEmbeddings) (*fakeEmbeddings, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
			http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		var req fakeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		req.Auth = r.Header.Get("Authorization")
		n := int(f.calls.Add(1))
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
		if f.RespondFunc != nil {
			f.RespondFunc(n, w, r, req)
			return
		}
		writeFakeJSON(w, http.StatusOK, f.body(req))
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

// body is the well-formed answer to req, data in reverse index order.
func (f *fakeEmbeddings) body(req fakeRequest) fakeBody {
	dim := f.Dim
	if req.Dimensions > 0 {
		dim = req.Dimensions
	}
	b := fakeBody{Object: "list", Model: req.Model}
	for i := len(req.Input) - 1; i >= 0; i-- {
		b.Data = append(b.Data, fakeDatum{Object: "embedding", Index: &i, Embedding: fakeVector(req.Input[i], dim)})
	}
	return b
}

func (f *fakeEmbeddings) seen() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

func writeFakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int) {
	writeFakeJSON(w, status, map[string]any{"error": map[string]any{
		"message": http.StatusText(status), "type": "server_error", "code": nil,
	}})
}

// fakeVector derives a deterministic, deliberately unnormalised vector from
// a hash of text.
func fakeVector(text string, dim int) []float32 {
	sum := sha256.Sum256([]byte(text))
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(3 * (r.Float64()*2 - 1))
	}
	return v
}

// wantVector is what the embedder should return for text from the fake.
func wantVector(t *testing.T, text string, dim int) []float32 {
	t.Helper()
	v := fakeVector(text, dim)
	if err := normalizeResponseVector(v); err != nil {
		t.Fatal(err)
	}
	return v
}

// newTestOpenAI builds an embedder with test-sized delays unless opts sets
// them.
func newTestOpenAI(t *testing.T, opts OpenAIOptions) *OpenAI {
	t.Helper()
	opts.BaseDelay = orDefaultValue(opts.BaseDelay, time.Millisecond)
	opts.MaxDelay = orDefaultValue(opts.MaxDelay, 20*time.Millisecond)
	opts.Model = orDefaultValue(opts.Model, "test-embed")
	e, err := NewOpenAI(opts)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	return e
}

// newProbedOpenAI is newTestOpenAI followed by Probe, as main does.
func newProbedOpenAI(t *testing.T, opts OpenAIOptions) *OpenAI {
	t.Helper()
	e := newTestOpenAI(t, opts)
	if _, err := e.Probe(t.Context()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return e
}
