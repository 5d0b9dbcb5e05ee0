package upstream

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

// Compare BenchmarkDo* with BenchmarkDirect* for the caller's own overhead on the
// success path over loopback (issue 4: median added ≤ 0.3 ms).

func benchServer(b *testing.B) string {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		ok(w, r, 0)
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// parallel16 runs body from 16 goroutines whatever GOMAXPROCS is.
func parallel16(b *testing.B, body func()) {
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body()
		}
	})
}

func benchCaller(b *testing.B) func() {
	c, err := New(oneTarget(benchServer(b)))
	if err != nil {
		b.Fatal(err)
	}
	req := chat("gpt-4o")
	return func() {
		if _, err := c.Do(b.Context(), req); err != nil {
			b.Error(err)
		}
	}
}

func benchDirect(b *testing.B) func() {
	url := benchServer(b) + "/chat/completions"
	body := chat("gpt-4o").Body
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return func() {
		req, _ := http.NewRequestWithContext(b.Context(), http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-client")
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkDo(b *testing.B) {
	do := benchCaller(b)
	b.ReportAllocs()
	for b.Loop() {
		do()
	}
}

func BenchmarkDirect(b *testing.B) {
	do := benchDirect(b)
	b.ReportAllocs()
	for b.Loop() {
		do()
	}
}

func BenchmarkDoParallel16(b *testing.B) {
	do := benchCaller(b)
	b.ReportAllocs()
	parallel16(b, do)
}

func BenchmarkDirectParallel16(b *testing.B) {
	do := benchDirect(b)
	b.ReportAllocs()
	parallel16(b, do)
}
