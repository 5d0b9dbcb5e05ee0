package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLargePromptFillMemory runs the sidecar as a process of its own, built
// from this module, on its defaults, and fills it with 200 prompts of 1 MiB
// from one tenant, 8 at a time. The process's resident memory (VmRSS from
// /proc) may grow by less than 400 MiB over what it held before the fill:
// twice the prompts' bytes at most, where one copy too many of each body
// (key, exact tier, write-back queue, index, encoder input) adds up
// quickly. Another tenant's small requests are answered throughout.
func TestLargePromptFillMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status: Linux only (GOOS)")
	}
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it builds the binary and sends 200 MiB")
	}
	const (
		prompts   = 200
		size      = 1 << 20
		clients   = 8
		maxGrowth = 400 << 20
	)
	bin := filepath.Join(t.TempDir(), "breakwater")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The model: a short answer to every prompt, read whole.
	var upstreamCalls atomic.Int64
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		upstreamCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-test",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"a prompt of %d bytes"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":5,"total_tokens":1005}}`, n)
	}))
	defer model.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"BREAKWATER_UPSTREAM_URL="+model.URL+"/v1",
		"BREAKWATER_SERVER_LISTEN="+addr,
		"BREAKWATER_CACHE_DATA_DIR="+t.TempDir(),
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
		if t.Failed() {
			t.Logf("sidecar output:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	for start := time.Now(); ; {
		if time.Since(start) > time.Minute {
			t.Fatalf("the sidecar is not ready after a minute:\n%s", logs.String())
		}
		select {
		case err := <-exited:
			t.Fatalf("the sidecar exited before it was ready: %v\n%s", err, logs.String())
		default:
		}
		if r, err := http.Get(base + "/readyz"); err == nil {
			var body struct{ Status string }
			_ = json.NewDecoder(r.Body).Decode(&body)
			r.Body.Close()
			if body.Status == "ready" {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}

	ask := func(tenant, prompt string) (int, string, error) {
		b, _ := json.Marshal(map[string]any{"model": "gpt-test", "messages": []any{map[string]any{"role": "user", "content": prompt}}})
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, "", fmt.Errorf("%d: %.300s", resp.StatusCode, body)
		}
		return resp.StatusCode, resp.Header.Get("X-Breakwater-Cache"), nil
	}
	// Warm the paths the fill takes (encoder, index, exact tier) with small
	// prompts, so the baseline holds what any served sidecar holds.
	for i := range 20 {
		if _, _, err := ask("warm", fmt.Sprintf("warm-up question number %d about the weather", i)); err != nil {
			t.Fatal(err)
		}
	}
	before := rss(t, cmd.Process.Pid)

	var peak atomic.Int64
	peak.Store(before)
	done := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // the process's resident memory, sampled through the fill
		for {
			if v := rss(t, cmd.Process.Pid); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	})
	var others, othersBad atomic.Int64
	var othersErr atomic.Value
	bg.Go(func() { // another tenant's small requests, answered throughout
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if _, _, err := ask("other", fmt.Sprintf("a small question %d", i%10)); err != nil {
				othersBad.Add(1)
				othersErr.Store(err)
				continue
			}
			others.Add(1)
		}
	})

	next := make(chan int)
	var fill sync.WaitGroup
	var fillErrs sync.Map
	var misses atomic.Int64
	for range clients {
		fill.Go(func() {
			for i := range next {
				_, outcome, err := ask("filler", largePrompt(i, size))
				if err != nil {
					fillErrs.Store(i, err)
					continue
				}
				if outcome == "miss" {
					misses.Add(1)
				}
			}
		})
	}
	othersAtStart := others.Load()
	for i := range prompts {
		next <- i
	}
	close(next)
	fill.Wait()
	othersDuring := others.Load() - othersAtStart
	close(done)
	bg.Wait()
	after := rss(t, cmd.Process.Pid)
	grew := peak.Load() - before
	t.Logf("sidecar RSS: %.1f MiB before the fill, peak %.1f MiB (+%.1f MiB), %.1f MiB after; %d misses, %d upstream calls; another tenant answered %d times during the fill",
		mib(before), mib(peak.Load()), mib(grew), mib(after), misses.Load(), upstreamCalls.Load(), othersDuring)
	fillErrs.Range(func(k, v any) bool {
		t.Errorf("prompt %d: %v", k, v)
		return true
	})
	if misses.Load() != prompts {
		t.Errorf("%d of %d distinct prompts answered as misses", misses.Load(), prompts)
	}
	if grew >= maxGrowth {
		t.Errorf("RSS grew by %.1f MiB under a fill of %d prompts of %d KiB, want < %.0f MiB", mib(grew), prompts, size>>10, mib(maxGrowth))
	}
	if n := othersBad.Load(); n > 0 {
		t.Errorf("another tenant's requests failed %d times during the fill, last: %v", n, othersErr.Load())
	}
	if othersDuring == 0 {
		t.Error("another tenant got no answer while the fill ran")
	}
}

// largePrompt is prompt i: about size bytes of words, distinct per i.
func largePrompt(i, size int) string {
	words := []string{"river", "stone", "cloud", "ledger", "harbor", "copper", "signal", "orchard", "lantern", "meadow",
		"thunder", "quartz", "falcon", "canyon", "ember", "willow", "glacier", "saddle", "prairie", "compass"}
	r := rand.New(rand.NewPCG(uint64(i), 1))
	var b strings.Builder
	b.Grow(size + 16)
	b.WriteString("document " + strconv.Itoa(i) + ":")
	for b.Len() < size {
		b.WriteByte(' ')
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// rss is the resident memory of process pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Error(err)
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Error(err)
			}
			return kb << 10
		}
	}
	t.Error("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
