//go:build unix

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/lib/cputime"
)

// The three request paths of a sidecar, measured end to end over loopback on
// the wired application with default settings (info logging, JSON, to a
// file): a miss with the cache off, a semantic miss (the built-in encoder,
// the embedded index, the write-back), and an exact hit. allocs/op include
// the load side's client and the upstream's handler; the upstream-only
// baseline (BenchmarkPaths/direct) gives those alone. Take profiles with
//
//	go test -run '^$' -bench BenchmarkPaths/hit -cpuprofile cpu.out ./internal/app

// pathsAnswer is a 1.4 KB completion, the size the per-request figures in
// docs/BENCHMARKS.md are measured with.
var pathsAnswer = func() []byte {
	content := strings.Repeat("The answer, in some detail. ", 44)
	return fmt.Appendf(nil, `{"id":"chatcmpl-up","object":"chat.completion","created":1700000000,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":16,"completion_tokens":300,"total_tokens":316}}`, content)
}()

// pathsUpstream answers every request with pathsAnswer after reading the body.
func pathsUpstream() (srv *httptest.Server) {
	pprof.Do(context.Background(), pprof.Labels("side", "upstream"), func(context.Context) {
		srv = pathsUpstreamServer()
	})
	return srv
}

func pathsUpstreamServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(pathsAnswer)
	}))
}

// startPaths runs the application on defaults but for the upstream, the data
// directory and whether the cache is on; the log goes to a file at info.
func startPaths(b *testing.B, upstreamURL string, cacheOn bool) string {
	b.Helper()
	dir := b.TempDir()
	toml := fmt.Sprintf(`
[cache]
enabled = %t
data_dir = %q
[[upstreams]]
name = "sim"
base_url = "%s/v1"
`, cacheOn, filepath.ToSlash(dir), upstreamURL)
	path := filepath.Join(dir, "breakwater.toml")
	if err := os.WriteFile(path, []byte(toml), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "access.log"))
	if err != nil {
		b.Fatal(err)
	}
	lb := newLogBuffer(logf) // as Main does
	log := NewLogger(lb, cfg.Server.LogLevel, cfg.Server.LogFormat)
	// Goroutines inherit profiler labels: everything the server runs,
	// including the workers New starts (the index write-back), is tagged
	// side=breakwater (go tool pprof -tagfocus side=breakwater).
	var a *App
	pprof.Do(context.Background(), pprof.Labels("side", "breakwater"), func(ctx context.Context) {
		a, err = New(ctx, cfg, Options{Logger: log})
	})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	pprof.Do(ctx, pprof.Labels("side", "breakwater"), func(ctx context.Context) {
		go func() { done <- a.Serve(ctx, ln) }()
	})
	<-a.IndexOpened() // the paths measured include the semantic tier
	b.Cleanup(func() {
		cancel()
		<-done
		lb.Close()
		logf.Close()
	})
	return "http://" + ln.Addr().String()
}

// pathsBody is a chat request of about 316 bytes around question.
func pathsBody(question string) []byte {
	return fmt.Appendf(nil, `{"model":"gpt-test","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly and precisely."},{"role":"user","content":%q}],"temperature":0,"max_tokens":256,"user":"bench-user-0001"}`, question)
}

// pathsQuestion is the i-th distinct question of 16 tokens or so.
func pathsQuestion(i int) string {
	return fmt.Sprintf("How can I reset the password of account number %d before the meeting?", i)
}

func BenchmarkPaths(b *testing.B) {
	parent := b
	up := pathsUpstream()
	defer up.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	defer client.CloseIdleConnections()
	// clients is the concurrency (with -cpu 1: 16, the default, or 1).
	clients := 16
	run := func(b *testing.B, url string, body func(i int) []byte, want string) {
		var seq atomic.Int64
		seq.Store(time.Now().UnixNano() % 1e9 * 1000) // new questions on every run
		b.ReportAllocs()
		b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		cpu0 := cputime.Process()
		defer func() {
			// Process CPU per request (server, client and upstream in one
			// process: subtract BenchmarkPaths/direct), steadier than wall
			// time on a shared machine.
			b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}()
		b.RunParallel(func(pb *testing.PB) {
			pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))
			for pb.Next() {
				h, err := postPaths(client, url, body(int(seq.Add(1))))
				if err != nil {
					b.Error(err)
					return
				}
				if got := h.Get("X-Breakwater-Cache"); want != "" && got != want {
					b.Errorf("X-Breakwater-Cache %q, want %q", got, want)
					return
				}
			}
		})
	}
	unique := func(i int) []byte { return pathsBody(pathsQuestion(i)) }
	b.Run("direct", func(b *testing.B) { run(b, up.URL, unique, "") })
	// The least a net/http proxy can do on a miss: miss-nocache minus this is
	// Breakwater's own work (routing, limits, metrics, the access line).
	b.Run("floor-nethttp", func(b *testing.B) {
		floor := httptest.NewServer(floorProxy(up.URL))
		defer floor.Close()
		run(b, floor.URL, unique, "")
	})
	b.Run("miss-nocache", func(b *testing.B) { run(b, startPaths(b, up.URL, false), unique, "bypass") })
	b.Run("miss-semantic", func(b *testing.B) { run(b, startPaths(b, up.URL, true), unique, "miss") })
	// The same past FlatLimit: the bucket holds a graph, so every write-back
	// is an HNSW insert and every lookup a graph search. The warm-up (one
	// app for every round) fills the bucket with 2,500 other questions.
	graphURL := ""
	b.Run("miss-semantic-graph", func(b *testing.B) {
		if graphURL == "" {
			graphURL = startPaths(parent, up.URL, true)
			warmPaths(b, client, graphURL, 2500)
		}
		run(b, graphURL, unique, "miss")
	})
	// One client at a time: the added latency of a semantic miss
	// (miss-semantic-c1 minus miss-nocache-c1, in ns/op at -cpu 1).
	b.Run("miss-nocache-c1", func(b *testing.B) {
		clients = 1
		defer func() { clients = 16 }()
		run(b, startPaths(b, up.URL, false), unique, "bypass")
	})
	b.Run("miss-semantic-c1", func(b *testing.B) {
		clients = 1
		defer func() { clients = 16 }()
		run(b, startPaths(b, up.URL, true), unique, "miss")
	})
	b.Run("hit-exact", func(b *testing.B) {
		url := startPaths(b, up.URL, true)
		same := pathsBody(pathsQuestion(0))
		if _, err := postPaths(client, url, same); err != nil {
			b.Fatal(err)
		}
		run(b, url, func(int) []byte { return same }, "hit-exact")
	})
}

// floorProxy reads the body, posts it to upstream with the two headers a
// model needs and writes the answer back: no routing, limits, metrics or log.
func floorProxy(upstream string) http.Handler {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	})
}

// postPaths sends one chat request to url as the benchmarks' client does,
// reads the answer to its end and returns its headers.
func postPaths(client *http.Client, url string, body []byte) (http.Header, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header, nil
}

// warmPaths sends n distinct questions to url, 16 at a time, and waits until
// the write-back queue has put them in the index (its stats count them).
func warmPaths(b *testing.B, client *http.Client, url string, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := postPaths(client, url, pathsBody(pathsQuestion(-int(i)))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := client.Get(url + "/stats")
		if err != nil {
			b.Fatal(err)
		}
		var st struct {
			Entries struct {
				Semantic int `json:"semantic"`
			} `json:"entries"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		if st.Entries.Semantic >= n*9/10 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("index holds %d entries after the warm-up of %d questions", st.Entries.Semantic, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
