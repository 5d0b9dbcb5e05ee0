package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type overheadTarget struct {
	name    string
	url     string
	headers [][2]string
}

type cell struct {
	target, path string
	c            int
	n, errs      int
	hits         int // answers whose cache header said hit
	rate         float64
	p50, p99     time.Duration
}

type overheadTargets []overheadTarget

func (t *overheadTargets) String() string { return fmt.Sprint(len(*t)) }

// Set parses name=url|Header=Value|Header=Value.
func (t *overheadTargets) Set(v string) error {
	parts := strings.Split(v, "|")
	name, url, ok := strings.Cut(parts[0], "=")
	if !ok || name == "" || url == "" {
		return fmt.Errorf("parse target %q: want name=url[|Header=Value...]", v)
	}
	tg := overheadTarget{name: name, url: strings.TrimSuffix(strings.TrimRight(url, "/"), "/v1") + "/v1/chat/completions"}
	for _, h := range parts[1:] {
		k, val, ok := strings.Cut(h, "=")
		if !ok {
			return fmt.Errorf("parse target %q: header %q: want Header=Value", v, h)
		}
		tg.headers = append(tg.headers, [2]string{k, val})
	}
	*t = append(*t, tg)
	return nil
}

// Overhead is the overhead command: it measures the latency a proxy adds to
// chat completions. Closed-loop workers at fixed concurrency send requests to
// each target in turn, on the miss path (every question unique) and the
// exact-hit path (a small set of questions asked again and again), and it
// prints a Markdown table of p50/p99, what each target adds to the first
// (the baseline) and the ratio. scripts/bench.sh runs it against Breakwater,
// nginx and Portkey:
//
//	breakwater overhead -target direct=http://127.0.0.1:19000 \
//	    -target breakwater=http://127.0.0.1:19080 -c 1,16,64 -d 5s
func Overhead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var targets overheadTargets
	fs.Var(&targets, "target", "name=url[|Header=Value...] (repeat; the first is the baseline)")
	conc := fs.String("c", "1,16,64", "comma-separated concurrency levels")
	paths := fs.String("paths", "miss,hit", "paths to measure: miss, hit")
	dur := fs.Duration("d", 5*time.Second, "measuring time per cell")
	warm := fs.Duration("warm", 500*time.Millisecond, "unmeasured warm-up per cell")
	skipHit := fs.String("skip-hit", "", "comma-separated targets without a cache (left out of the hit path)")
	model := fs.String("model", "gpt-test", "model of every request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(targets) < 2 {
		return errors.New("parse flags: give a baseline and at least one -target")
	}
	var levels []int
	for _, s := range strings.Split(*conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			return fmt.Errorf("parse flags: -c %q: want positive integers", *conc)
		}
		levels = append(levels, c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	nonce := fmt.Sprintf("%08x", rand.Uint32())

	var cells []cell
	for _, path := range strings.Split(*paths, ",") {
		for _, c := range levels {
			for _, tg := range targets {
				if path == "hit" && slices.Contains(strings.Split(*skipHit, ","), tg.name) {
					continue
				}
				var seq atomic.Int64
				body := func() []byte {
					i := seq.Add(1)
					q := fmt.Sprintf("Question %d of run %s at concurrency %d: %s", i, nonce, c, overheadTopics[i%int64(len(overheadTopics))])
					if path == "hit" {
						q = fmt.Sprintf("Popular question %d: %s", i%32, overheadTopics[i%32%int64(len(overheadTopics))])
					}
					b, _ := json.Marshal(map[string]any{"model": *model, "messages": []map[string]string{{"role": "user", "content": q}}})
					return b
				}
				if path == "hit" {
					// Fill the cache: every popular question once, in order.
					for range 64 {
						if _, _, err := postChat(ctx, client, tg, body()); err != nil {
							return fmt.Errorf("warm %s: %w", tg.name, err)
						}
					}
				} else if path != "miss" {
					return fmt.Errorf("parse flags: -paths: unknown path %q", path)
				}
				fmt.Fprintf(stderr, "%s path, c=%d, %s ...\n", path, c, tg.name)
				cl, err := measureCell(ctx, client, tg, c, *warm, *dur, body)
				if err != nil {
					return err
				}
				cl.path = path
				cells = append(cells, cl)
			}
		}
	}
	writeOverhead(stdout, cells, targets[0].name)
	return nil
}

// measureCell runs c closed-loop workers for warm+d and keeps the latencies of
// the last d.
func measureCell(ctx context.Context, client *http.Client, tg overheadTarget, c int, warm, d time.Duration, body func() []byte) (cell, error) {
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+d)
	var (
		mu   sync.Mutex
		lat  []time.Duration
		errs int
		hits int
		wg   sync.WaitGroup
	)
	for range c {
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(until) {
					return
				}
				hit, status, err := postChat(ctx, client, tg, body())
				el := time.Since(t0)
				if t0.Before(from) {
					continue
				}
				mu.Lock()
				if err != nil || status != http.StatusOK {
					errs++
				} else {
					lat = append(lat, el)
					if hit {
						hits++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return cell{}, err
	}
	p := percentiles(lat)
	return cell{target: tg.name, c: c, n: len(lat), errs: errs, hits: hits, rate: float64(len(lat)) / d.Seconds(), p50: p.P50, p99: p.P99}, nil
}

// postChat sends one request and reports whether a cache answered it.
func postChat(ctx context.Context, client *http.Client, tg overheadTarget, body []byte) (bool, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-overhead")
	for _, h := range tg.headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	bw := resp.Header.Get("X-Breakwater-Cache")
	hit := strings.HasPrefix(bw, "hit") || strings.EqualFold(resp.Header.Get("X-Cache-Status"), "HIT")
	return hit, resp.StatusCode, err
}

func writeOverhead(w io.Writer, cells []cell, baseline string) {
	base := map[string]cell{}
	for _, c := range cells {
		if c.target == baseline {
			base[fmt.Sprint(c.path, c.c)] = c
		}
	}
	fmt.Fprintln(w, "| path | concurrency | target | req/s | p50 | p99 | p50 added | p99 added | p50 ratio | p99 ratio | cache hits | errors |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range cells {
		b := base[fmt.Sprint(c.path, c.c)]
		added50, added99, r50, r99 := "", "", "", ""
		if c.target != baseline && b.p50 > 0 {
			added50, added99 = msTable(c.p50-b.p50), msTable(c.p99-b.p99)
			r50 = fmt.Sprintf("%.1f×", float64(c.p50)/float64(b.p50))
			r99 = fmt.Sprintf("%.1f×", float64(c.p99)/float64(b.p99))
		}
		hits := "–"
		if c.n > 0 && c.target != baseline {
			hits = fmt.Sprintf("%.0f%%", 100*float64(c.hits)/float64(c.n))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %d |\n",
			c.path, c.c, c.target, c.rate, msTable(c.p50), msTable(c.p99), added50, added99, r50, r99, hits, c.errs)
	}
}

// msTable formats d for the Markdown table: always milliseconds with two
// decimals, negative when a target beat the baseline.
func msTable(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
}

var overheadTopics = []string{
	"how do I reverse a list in Python?", "what is the best way to parse JSON in Go?",
	"how can I read a file line by line in Rust?", "what's the easiest way to format a date in Java?",
	"how do I make an HTTP request in JavaScript?", "how can I hash a password in Ruby?",
	"what is the simplest way to sort a map by value in Kotlin?", "how do I compress a file with gzip in C#?",
}
