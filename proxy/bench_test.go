package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkExactHitHandler measures the exact-hit path inside the process:
// parse, key, ristretto lookup, identity rewrite, response (no network).
func BenchmarkExactHitHandler(b *testing.B) {
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	body := chat("What is the capital of France?")
	e.post("/v1/chat/completions", body, "Authorization", "Bearer bench")
	h := e.server.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer bench")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Header().Get(HeaderCache) != OutcomeHitExact {
			b.Fatalf("status %d cache %q", rec.Code, rec.Header().Get(HeaderCache))
		}
	}
}

// BenchmarkLoopback compares, in one run, a direct call to an upstream that
// answers at once with an exact hit through Breakwater over loopback HTTP:
// the ratio of the two is what Breakwater costs a hit, and the miss case
// what it adds in front of the upstream. p50/p99 are reported per op.
func BenchmarkLoopback(b *testing.B) {
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	body := chat("What is the capital of France?")
	e.post("/v1/chat/completions", body, "Authorization", "Bearer bench")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	run := func(b *testing.B, url string, headers ...string) {
		lat := make([]time.Duration, 0, 4096)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			t0 := time.Now()
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer bench")
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	}
	b.Run("direct", func(b *testing.B) { run(b, e.upstream.URL+"/v1/chat/completions") })
	b.Run("breakwater-hit", func(b *testing.B) { run(b, e.front.URL+"/v1/chat/completions") })
	b.Run("breakwater-miss", func(b *testing.B) {
		run(b, e.front.URL+"/v1/chat/completions", "Cache-Control", "no-cache, no-store")
	})
}

// BenchmarkExactHitThroughput is the exact-hit request rate over loopback
// with parallel clients (-cpu sets the parallelism); see req/s.
func BenchmarkExactHitThroughput(b *testing.B) {
	e := newEnv(&testing.T{}, envOptions{})
	defer closeEnv(e)
	body := []byte(chat("What is the capital of France?"))
	e.post("/v1/chat/completions", string(body), "Authorization", "Bearer bench")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := e.front.URL + "/v1/chat/completions"
	b.ReportAllocs()
	b.SetParallelism(8)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer bench")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
