package proxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkExactHitSize is the exact hit inside the process (parse, key,
// lookup, write; no network) against the size of the stored answer, as
// JSON and replayed as SSE (a "stream": true request of a cached answer).
// p50/p99 are per request.
//
//	go test -run '^$' -bench ExactHitSize -benchtime 2000x ./proxy/
func BenchmarkExactHitSize(b *testing.B) {
	for _, size := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		for _, stream := range []bool{false, true} {
			mode := "json"
			if stream {
				mode = "sse"
			}
			b.Run(fmt.Sprintf("%dKB/%s", size>>10, mode), func(b *testing.B) {
				benchHitSize(b, size, stream)
			})
		}
	}
}

func benchHitSize(b *testing.B, size int, stream bool) {
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	// An answer of about size bytes in all, in words so that the SSE replay
	// has realistic pieces.
	content := strings.Repeat("lorem ipsum dolor sit amet, ", size/28)
	e.model.HandleFunc = func(w http.ResponseWriter, r *http.Request, body map[string]any) bool {
		writeJSON(w, 200, completion(body, content))
		return true
	}
	question := "What is the capital of France?"
	e.post("/v1/chat/completions", chat(question), "Authorization", "Bearer bench")
	body := chat(question)
	if stream {
		body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
	}
	h := e.server.Handler()
	lat := make([]time.Duration, 0, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer bench")
		rec := &countingWriter{header: http.Header{}}
		h.ServeHTTP(rec, req)
		lat = append(lat, time.Since(t0))
		if rec.code != 200 || rec.header.Get(HeaderCache) != OutcomeHitExact {
			b.Fatalf("status %d cache %q", rec.code, rec.header.Get(HeaderCache))
		}
		if rec.n < size/2 {
			b.Fatalf("answer of %d bytes, want about %d", rec.n, size)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// countingWriter is a ResponseWriter that keeps only the status, headers
// and byte count, so the benchmark measures the server, not a buffer.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
func (w *countingWriter) Flush() {}
