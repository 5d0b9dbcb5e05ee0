package embedded

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// BenchmarkRealScale measures how the index grows with its entries, on the
// QQP dev texts encoded by the built-in encoder (see BenchmarkReal and its
// BREAKWATER_BENCH_REAL=1 switch). The ~19k unique b texts are stored first;
// beyond them, each further entry is derived from two stored real vectors
// i ≠ j, drawn at random (seed 1), as normalise(v_i + v_j): a point between
// two real sentence vectors, so the stored set keeps the shape of encoder
// output (its clustering and its similarity spread), which random unit
// vectors do not. Queries are the a texts, never used in a derived point.
//
// Per size it reports: the search p50/p99 (Limit 1, default EfSearch, 2000
// queries), recall@1 against an exact scan for 200 of them, heap bytes per
// entry and process RSS after Open, the build's time, heap and RSS, the
// start-up time (Open of a snapshot of that many entries) and touch-s, the
// time to allocate and touch as much fresh memory as the loaded index holds
// (start-up's floor). Each size's index is built once and kept (scaleDir).
// BREAKWATER_BENCH_SCALE lists the sizes (default 10000,100000; 1000000
// needs ~8 GB while it builds, and 15–30 minutes on 2 cores):
//
//	BREAKWATER_BENCH_REAL=1 BREAKWATER_BENCH_SCALE=10000,100000,1000000 \
//	    go test -run '^$' -bench RealScale -benchtime 1x -timeout 2h ./cache/embedded/
func BenchmarkRealScale(b *testing.B) {
	if os.Getenv("BREAKWATER_BENCH_REAL") != "1" {
		b.Skip("needs the QQP pairs file and minutes of encoding: set BREAKWATER_BENCH_REAL=1")
	}
	sizes := []int{10_000, 100_000}
	if env := os.Getenv("BREAKWATER_BENCH_SCALE"); env != "" {
		sizes = nil
		for f := range strings.SplitSeq(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("BREAKWATER_BENCH_SCALE=%q: want sizes such as 10000,100000", env)
			}
			sizes = append(sizes, n)
		}
	}
	rd := loadReal(b, false)
	queries := rd.queries[:min(2000, len(rd.queries))]
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			benchRealScale(b, rd.stored, queries, n)
		})
	}
}

// scaleVectors returns n vectors: the real ones first, then derived points.
func scaleVectors(real [][]float32, n int) [][]float32 {
	out := make([][]float32, 0, n)
	out = append(out, real[:min(n, len(real))]...)
	rng := rand.New(rand.NewPCG(1, 1))
	backing := make([]float32, (n-len(out))*benchDim)
	for len(out) < n {
		i := rng.IntN(len(real))
		j := rng.IntN(len(real) - 1)
		if j >= i {
			j++
		}
		v := backing[:benchDim:benchDim]
		backing = backing[benchDim:]
		var ss float64
		for k := range v {
			v[k] = real[i][k] + real[j][k]
			ss += float64(v[k]) * float64(v[k])
		}
		inv := float32(1 / math.Sqrt(ss))
		for k := range v {
			v[k] *= inv
		}
		out = append(out, v)
	}
	return out
}

// scaleBuild is what a build of one size measured, kept next to its
// snapshot so that a later run can reuse the index.
type scaleBuild struct {
	Entries      int     `json:"entries"`
	BuildSeconds float64 `json:"build_seconds"`
	HeapPerEntry float64 `json:"heap_bytes_per_entry"`
	RSSBytes     int64   `json:"rss_bytes"`
	Procs        int     `json:"gomaxprocs"`
	Finished     string  `json:"finished"`
}

// scaleDir is where the index of n entries built from real is kept between
// runs: under os.TempDir(), keyed by the size, the graph parameters and a
// hash of the real vectors. BREAKWATER_BENCH_REBUILD=1 ignores a kept one.
func scaleDir(real [][]float32, n int) string {
	h := fnv.New64a()
	var buf [4]byte
	for _, v := range real {
		for _, x := range v {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(x))
			h.Write(buf[:])
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("breakwater-realscale-n%d-m%d-efc%d-%016x", n, benchM, benchEfC, h.Sum64()))
}

// scaleOptions are realOptions with a byte budget for every size measured:
// the default (DefaultMaxBytes, 256 MiB) holds ~100k entries of 512
// dimensions and would evict the rest while the index is built.
func scaleOptions(path string) Options {
	o := realOptions(path, 0)
	o.MaxBytes = 64 << 30
	return o
}

// buildScale builds the index of vecs and writes its snapshot under dir,
// with what the build measured in dir/build.json.
func buildScale(b *testing.B, vecs [][]float32, dir string) scaleBuild {
	runtime.GC()
	heap0 := heapInUse()
	x, err := Open(scaleOptions(""))
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 160) + `"},"finish_reason":"stop"}]}`)
	now := time.Now()
	start := time.Now()
	const batch = 1000
	items := make([]cache.IndexItem, 0, batch)
	for i, v := range vecs {
		items = append(items, cache.IndexItem{
			Entry:  cache.Entry{Key: fmt.Sprint("s", i), Partition: "p", Fingerprint: "f", Query: fmt.Sprintf("question %d", i), Model: "gpt-4o-mini", Body: body, Created: now},
			Vector: v,
		})
		if len(items) == batch || i == len(vecs)-1 {
			if err := x.Upsert(b.Context(), items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
			if (i+1)%100_000 == 0 {
				// To stderr: a benchmark's log is only printed when it ends.
				fmt.Fprintf(os.Stderr, "built %d / %d in %v\n", i+1, len(vecs), time.Since(start).Round(time.Second))
			}
		}
	}
	if got := length(b, x); got != len(vecs) {
		b.Fatalf("the index holds %d of the %d entries built", got, len(vecs))
	}
	sb := scaleBuild{Entries: len(vecs), BuildSeconds: time.Since(start).Seconds(), Procs: runtime.GOMAXPROCS(0)}
	sb.HeapPerEntry = float64(heapInUse()-heap0) / float64(len(vecs))
	sb.RSSBytes = rssBytes()
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	o := scaleOptions(dir)
	if err := checkManifest(dir, o); err != nil {
		b.Fatal(err)
	}
	if err := writeSnapshot(dir, x.st, o, 1); err != nil {
		b.Fatal(err)
	}
	x.Close()
	sb.Finished = time.Now().UTC().Format(time.RFC3339)
	js, _ := json.Marshal(sb)
	if err := os.WriteFile(filepath.Join(dir, "build.json"), js, 0o644); err != nil {
		b.Fatal(err)
	}
	return sb
}

func benchRealScale(b *testing.B, real, queries [][]float32, n int) {
	dir := scaleDir(real, n)
	var sb scaleBuild
	js, err := os.ReadFile(filepath.Join(dir, "build.json"))
	if err == nil && os.Getenv("BREAKWATER_BENCH_REBUILD") != "1" && json.Unmarshal(js, &sb) == nil && sb.Entries == n {
		b.Logf("reusing the index built %s in %.0f s, at %s", sb.Finished, sb.BuildSeconds, dir)
	} else {
		sb = buildScale(b, scaleVectors(real, n), dir)
		b.Logf("built in %.0f s, kept at %s", sb.BuildSeconds, dir)
	}
	// The vectors are derived again after Open, for the exact scan, so
	// that the RSS measured is the loaded index's (a run that also built
	// the index still holds some of the build's pages).
	debug.FreeOSMemory()
	o := scaleOptions(dir)
	heap0 := heapInUse()
	start := time.Now()
	x, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	startup := time.Since(start)
	perEntry := float64(heapInUse()-heap0) / float64(n)
	rss := rssBytes()
	defer x.Close()
	if got := length(b, x); got != n {
		b.Fatalf("the reopened index holds %d of %d entries", got, n)
	}
	floor := touchFresh(int(perEntry * float64(n)))
	vecs := scaleVectors(real, n)

	durs := make([]time.Duration, 0, len(queries))
	var top1 []cache.Match
	b.ResetTimer()
	for b.Loop() {
		durs = durs[:0]
		top1 = top1[:0]
		for _, q := range queries {
			t0 := time.Now()
			ms, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: q, Threshold: 0, Limit: 1})
			durs = append(durs, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			var m cache.Match
			if len(ms) > 0 {
				m = ms[0]
			}
			top1 = append(top1, m)
		}
	}
	b.StopTimer()
	const checked = 200
	truth := exactTop(vecs, queries[:min(checked, len(queries))], 1)
	found := 0
	for i, t := range truth {
		if top1[i].Score >= t[0].sim-realEps {
			found++
		}
	}
	reportLatency(b, durs)
	b.ReportMetric(float64(found)/float64(len(truth)), "recall@1")
	b.ReportMetric(perEntry, "heap-B/entry")
	b.ReportMetric(sb.HeapPerEntry, "build-heap-B/entry")
	b.ReportMetric(float64(rss)/(1<<20), "RSS-MiB")
	b.ReportMetric(float64(sb.RSSBytes)/(1<<20), "build-RSS-MiB")
	b.ReportMetric(sb.BuildSeconds, "build-s")
	b.ReportMetric(startup.Seconds(), "startup-s")
	b.ReportMetric(floor.Seconds(), "touch-s")
}

// touchFresh returns how long allocating n bytes of memory new to the
// process and writing a byte of each page takes: the part of start-up that
// no loader can avoid, since the loaded index must be resident. On a VM it
// can be most of it (the host maps each page on first touch).
func touchFresh(n int) time.Duration {
	debug.FreeOSMemory()
	start := time.Now()
	p := make([]byte, n)
	for i := 0; i < len(p); i += 4096 {
		p[i] = 1
	}
	d := time.Since(start)
	runtime.KeepAlive(p)
	return d
}

// rssBytes is this process's resident set size (Linux; 0 elsewhere).
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
