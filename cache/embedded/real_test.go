package embedded

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
	"github.com/breakwater-dev/breakwater/embed"
)

// BenchmarkReal measures the index on real sentence vectors instead of the
// random ones of BenchmarkSearch: the texts of the QQP dev pairs, encoded by
// the built-in encoder. The unique b texts are stored in one bucket (above
// FlatLimit, so the HNSW graph is searched); the unique a texts that are not
// also b texts are the queries. Recall is measured against an exact
// brute-force search over the same stored vectors.
//
// It runs only with BREAKWATER_BENCH_REAL=1 (encoding ~38k texts takes a
// minute or two of CPU; the vectors are then cached under os.TempDir(),
// keyed by the pairs file's size and mtime). BREAKWATER_PAIRS overrides the
// pairs file; BREAKWATER_BENCH_EF, a comma-separated list, overrides the
// EfSearch values swept. BREAKWATER_BENCH_REAL=random is the control: the
// same counts of stored vectors and queries, but random unit vectors
// (nothing is encoded). One op is one pass over every query, so
// -benchtime 1x is enough:
//
//	BREAKWATER_BENCH_REAL=1 go test -run '^$' -bench Real -benchtime 1x ./cache/embedded/
func BenchmarkReal(b *testing.B) {
	mode := os.Getenv("BREAKWATER_BENCH_REAL")
	if mode != "1" && mode != "random" {
		b.Skip("needs the QQP pairs file and minutes of encoding: set BREAKWATER_BENCH_REAL=1")
	}
	rd := loadReal(b, mode == "random")
	start := time.Now()
	truth := exactTop(rd.stored, rd.queries, realK)
	b.Logf("exact top-%d of %d queries in %v on %d cores", realK, len(rd.queries), time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	checkTruth(b, rd, truth, 200)
	hi, negative := 0, 0
	for _, t := range truth {
		if t[0].sim >= realHiScore {
			hi++
		}
		if t[realK-1].sim < 0 {
			negative++
		}
	}
	b.Logf("%d stored, %d queries, %d with an exact top-1 score >= %.2f; %d queries have a negative score in their exact top-%d",
		len(rd.stored), len(rd.queries), hi, realHiScore, negative, realK)
	best := make([]float64, len(truth))
	for i, t := range truth {
		best[i] = float64(t[0].sim)
	}
	slices.Sort(best)
	pct := func(p float64) float64 { return best[int(p*float64(len(best)-1))] }
	b.Logf("exact top-1 score: p10 %.3f, p25 %.3f, p50 %.3f, p75 %.3f, p90 %.3f", pct(0.10), pct(0.25), pct(0.50), pct(0.75), pct(0.90))
	dir := buildRealIndex(b, rd)

	for _, ef := range realEfs(b) {
		b.Run(fmt.Sprintf("ef=%d", ef), func(b *testing.B) {
			x, err := Open(realOptions(dir, ef))
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			if bk := x.st.buckets[bucketKey{"p", "f"}]; bk == nil || bk.g == nil {
				b.Fatalf("the bucket of %d entries has no graph: the benchmark would measure the flat scan", len(rd.stored))
			}
			for _, limit := range []int{1, realK} {
				b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
					benchReal(b, x, rd, truth, limit, hi)
				})
			}
		})
	}
}

const (
	realK       = 10   // the larger Limit, and the depth of the exact ground truth
	realHiScore = 0.85 // exact top-1 score from which a query could become a cache hit
	realEps     = 1e-6 // scores this close count as a tie
	realBatch   = 64   // texts per Embed call
)

// realData holds the unique texts' vectors, as the encoder returned them.
type realData struct {
	stored, queries [][]float32
	keys            []string // per stored vector
}

// realOptions mirrors benchOptions, with EfSearch given.
func realOptions(path string, ef int) Options {
	return Options{Path: path, Dimension: benchDim, EmbedderName: "bench", MaxEntries: 2_000_000, M: benchM, EfConstruction: benchEfC, EfSearch: ef, SweepEvery: -1}
}

// realEfs returns the EfSearch values to sweep: BREAKWATER_BENCH_EF as a
// comma-separated list, else a sweep around the package default.
func realEfs(b *testing.B) []int {
	def, err := Options{Dimension: 1}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	env := os.Getenv("BREAKWATER_BENCH_EF")
	if env == "" {
		return []int{16, 32, def.EfSearch, 2 * def.EfSearch, 4 * def.EfSearch}
	}
	var efs []int
	for f := range strings.SplitSeq(env, ",") {
		ef, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("BREAKWATER_BENCH_EF=%q: %v", env, err)
		}
		if ef <= 0 {
			ef = def.EfSearch
		}
		efs = append(efs, ef)
	}
	return efs
}

// loadReal reads the pairs, splits their unique texts into stored (b) and
// query (a, not also a b) texts and embeds them, or loads their cached
// vectors. The pairs are parsed here rather than with evalcmd.ReadPairs:
// evalcmd imports this package, so this in-package test cannot import it.
func loadReal(b *testing.B, random bool) realData {
	b.Helper()
	path := os.Getenv("BREAKWATER_PAIRS")
	if path == "" {
		path = filepath.Join("..", "..", "docs", "data", "qqp-dev.jsonl")
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatalf("pairs file (set BREAKWATER_PAIRS to override): %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	var as, bs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var p struct{ A, B string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			b.Fatalf("%s line %d: %v", path, line, err)
		}
		as, bs = append(as, p.A), append(bs, p.B)
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	// The encoder rejects "" and invalid UTF-8.
	ok := func(t string) bool { return t != "" && utf8.ValidString(t) }
	var stored, queries []string
	isB := map[string]bool{}
	for _, t := range bs {
		if ok(t) && !isB[t] {
			isB[t] = true
			stored = append(stored, t)
		}
	}
	seen := map[string]bool{}
	for _, t := range as {
		if ok(t) && !isB[t] && !seen[t] {
			seen[t] = true
			queries = append(queries, t)
		}
	}
	// The graph is only built above FlatLimit; with a smaller pairs file,
	// store some of the a texts too.
	def, err := Options{Dimension: benchDim}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	if need := def.FlatLimit + 1 - len(stored); need > 0 {
		if need >= len(queries) {
			b.Fatalf("%s has %d unique texts; the graph needs more than %d stored plus some queries", path, len(stored)+len(queries), def.FlatLimit)
		}
		stored = append(stored, queries[len(queries)-need:]...)
		queries = queries[:len(queries)-need]
	}
	texts := append(append([]string{}, stored...), queries...)
	var vecs [][]float32
	if random {
		rng := rand.New(rand.NewPCG(42, 42))
		for range texts {
			vecs = append(vecs, indextest.RandomUnit(rng, benchDim))
		}
		b.Logf("control: %d random unit vectors instead of the encoded texts", len(vecs))
	} else {
		vecs = realVectors(b, fi, texts)
	}
	keys := make([]string, len(stored))
	for i := range keys {
		keys[i] = fmt.Sprint("s", i)
	}
	return realData{stored: vecs[:len(stored)], queries: vecs[len(stored):], keys: keys}
}

// realVectors embeds texts in batches of realBatch, or loads them from the
// cache file that a previous run with the same pairs file wrote.
func realVectors(b *testing.B, fi os.FileInfo, texts []string) [][]float32 {
	b.Helper()
	h := fnv.New64a()
	for _, t := range texts {
		io.WriteString(h, t)
		h.Write([]byte{0})
	}
	sum := h.Sum64()
	cachePath := filepath.Join(os.TempDir(), fmt.Sprintf("breakwater-real-%d-%d-%s.vec",
		fi.Size(), fi.ModTime().UnixNano(), strings.NewReplacer(":", "_", "@", "_", "/", "_").Replace(embed.BuiltinName)))
	if vecs, err := readRealVectors(cachePath, sum, len(texts)); err == nil {
		b.Logf("loaded %d vectors from %s", len(vecs), cachePath)
		return vecs
	} else if !errors.Is(err, os.ErrNotExist) {
		b.Logf("ignoring vector cache %s: %v", cachePath, err)
	}
	enc, err := embed.NewBuiltin()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	vecs := make([][]float32, 0, len(texts))
	for i := 0; i < len(texts); i += realBatch {
		vs, err := enc.Embed(context.Background(), texts[i:min(i+realBatch, len(texts))])
		if err != nil {
			b.Fatal(err)
		}
		vecs = append(vecs, vs...)
		if n := i + realBatch; n%(realBatch*100) == 0 {
			b.Logf("embedded %d / %d texts in %v", n, len(texts), time.Since(start).Round(time.Second))
		}
	}
	b.Logf("embedded %d texts in %v", len(texts), time.Since(start).Round(time.Millisecond))
	if err := writeRealVectors(cachePath, sum, vecs); err != nil {
		b.Logf("cache vectors: %v", err)
	}
	return vecs
}

const realMagic = "BWREALV1"

// Vector cache format: magic, uint64 hash of the texts, uint32 count,
// uint32 dimension, then the float32s, all little-endian.
func writeRealVectors(path string, sum uint64, vecs [][]float32) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	w := bufio.NewWriter(f)
	w.WriteString(realMagic)
	var hdr [16]byte
	binary.LittleEndian.PutUint64(hdr[0:], sum)
	binary.LittleEndian.PutUint32(hdr[8:], uint32(len(vecs)))
	binary.LittleEndian.PutUint32(hdr[12:], benchDim)
	w.Write(hdr[:])
	var buf [4]byte
	for _, v := range vecs {
		for _, x := range v {
			binary.LittleEndian.PutUint32(buf[:], math.Float32bits(x))
			w.Write(buf[:])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func readRealVectors(path string, sum uint64, n int) ([][]float32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	hdrLen := len(realMagic) + 16
	if len(data) < hdrLen || string(data[:len(realMagic)]) != realMagic {
		return nil, errors.New("not a vector cache")
	}
	h := data[len(realMagic):hdrLen]
	if binary.LittleEndian.Uint64(h) != sum || int(binary.LittleEndian.Uint32(h[8:])) != n || binary.LittleEndian.Uint32(h[12:]) != benchDim {
		return nil, errors.New("written for other texts")
	}
	body := data[hdrLen:]
	if len(body) != n*benchDim*4 {
		return nil, fmt.Errorf("%d bytes of vectors, want %d", len(body), n*benchDim*4)
	}
	backing := make([]float32, n*benchDim)
	for i := range backing {
		backing[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[4*i:]))
	}
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = backing[i*benchDim : (i+1)*benchDim : (i+1)*benchDim]
	}
	return vecs, nil
}

// exactTop returns, per query, the k stored vectors most similar to it, best
// first, by brute force over the vectors exactly as the index holds and
// searches them: Upsert normalises every stored vector, Search normalises a
// query that is not unit length already. Queries go in blocks of 32 (64 KB,
// cache-resident) per pass over the stored vectors, which would otherwise
// be streamed from RAM once per query.
func exactTop(stored, queries [][]float32, k int) [][]cand {
	const block = 32
	norm := make([][]float32, len(stored))
	for i, v := range stored {
		norm[i] = normalize(v)
	}
	out := make([][]cand, len(queries))
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				mu.Lock()
				lo := next
				next += block
				mu.Unlock()
				if lo >= len(queries) {
					return
				}
				hi := min(lo+block, len(queries))
				qs := make([][]float32, 0, block)
				for _, q := range queries[lo:hi] {
					if !isUnit(q) {
						q = normalize(q)
					}
					qs = append(qs, q)
				}
				tops := make([][]cand, len(qs)) // best first
				for j, v := range norm {
					for qi, q := range qs {
						s := dot(q, v)
						top := tops[qi]
						if len(top) == k && s <= top[k-1].sim {
							continue
						}
						at := len(top)
						for at > 0 && top[at-1].sim < s {
							at--
						}
						top = append(top, cand{})
						copy(top[at+1:], top[at:])
						top[at] = cand{int32(j), s}
						if len(top) > k {
							top = top[:k]
						}
						tops[qi] = top
					}
				}
				copy(out[lo:hi], tops)
			}
		})
	}
	wg.Wait()
	return out
}

// checkTruth compares the first n queries' ground truth with the index's own
// exact scan (FlatLimit above the bucket size, so no graph).
func checkTruth(b *testing.B, rd realData, truth [][]cand, n int) {
	b.Helper()
	o := realOptions("", 0)
	o.FlatLimit = len(rd.stored) + 1
	x, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	items := make([]cache.IndexItem, len(rd.stored))
	for i, v := range rd.stored {
		items[i] = cache.IndexItem{Entry: cache.Entry{Key: rd.keys[i], Partition: "p", Fingerprint: "f"}, Vector: v}
	}
	if err := x.Upsert(b.Context(), items); err != nil {
		b.Fatal(err)
	}
	for qi := range min(n, len(rd.queries)) {
		ms, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: rd.queries[qi], Threshold: -1, Limit: realK})
		if err != nil {
			b.Fatal(err)
		}
		t := truth[qi]
		if len(ms) != len(t) {
			b.Fatalf("query %d: exact scan returned %d matches, ground truth has %d", qi, len(ms), len(t))
		}
		for i, m := range ms {
			if math.Abs(float64(m.Score-t[i].sim)) > realEps {
				b.Fatalf("query %d: exact scan's match %d scores %v, ground truth %v", qi, i, m.Score, t[i].sim)
			}
		}
	}
}

// buildRealIndex stores rd.stored in one bucket of an in-memory index, the
// way benchIndex builds its indexes, and saves it as a snapshot in a
// temporary folder that each EfSearch setting then opens.
func buildRealIndex(b *testing.B, rd realData) string {
	b.Helper()
	x, err := Open(realOptions("", 0))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	now := time.Now()
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", 160) + `"},"finish_reason":"stop"}]}`)
	start := time.Now()
	const batch = 1000
	for i := 0; i < len(rd.stored); i += batch {
		items := make([]cache.IndexItem, 0, batch)
		for j := i; j < min(i+batch, len(rd.stored)); j++ {
			items = append(items, cache.IndexItem{
				Entry:  cache.Entry{Key: rd.keys[j], Partition: "p", Fingerprint: "f", Model: "gpt-4o-mini", Body: body, Created: now},
				Vector: rd.stored[j],
			})
		}
		if err := x.Upsert(b.Context(), items); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built the index of %d entries in %v", len(rd.stored), time.Since(start).Round(time.Millisecond))
	dir := b.TempDir()
	o := realOptions(dir, 0)
	if err := checkManifest(dir, o); err != nil {
		b.Fatal(err)
	}
	if err := writeSnapshot(dir, x.st, o, 1); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchReal runs every query with Limit limit and Threshold 0, once per op,
// and reports recall against truth and the latency of each Search.
func benchReal(b *testing.B, x *Index, rd realData, truth [][]cand, limit, hi int) {
	keyIdx := make(map[string]int32, len(rd.keys))
	for i, k := range rd.keys {
		keyIdx[k] = int32(i)
	}
	durs := make([]time.Duration, 0, len(rd.queries))
	got := make([][]cache.Match, 0, len(rd.queries))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ReportAllocs()
	for b.Loop() {
		got = got[:0]
		for _, q := range rd.queries {
			start := time.Now()
			ms, err := x.Search(b.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: q, Threshold: 0, Limit: limit})
			durs = append(durs, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			got = append(got, ms)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)

	// recall@1: the first match scores as high as the exact best (a tie
	// with another vector counts). recall@k: the matches that score at
	// least the exact k-th best, over k.
	top1, top1Hi, inK := 0, 0, 0
	for qi, ms := range got {
		t := truth[qi]
		if len(ms) > 0 && ms[0].Score >= t[0].sim-realEps {
			top1++
			if t[0].sim >= realHiScore {
				top1Hi++
			}
		}
		if limit > 1 {
			kth := t[len(t)-1].sim
			seen := map[int32]bool{}
			for _, m := range ms[:min(len(ms), realK)] {
				if id, ok := keyIdx[m.Entry.Key]; ok && !seen[id] && m.Score >= kth-realEps {
					seen[id] = true
					inK++
				}
			}
		}
	}
	n := float64(len(rd.queries))
	reportLatency(b, durs)
	b.ReportMetric(float64(len(rd.stored)), "stored")
	b.ReportMetric(n, "queries")
	b.ReportMetric(float64(hi), "hi-queries")
	b.ReportMetric(float64(top1)/n, "recall@1")
	if hi > 0 {
		b.ReportMetric(float64(top1Hi)/float64(hi), "recall@1-hi")
	}
	if limit > 1 {
		b.ReportMetric(float64(inK)/(n*realK), fmt.Sprintf("recall@%d", realK))
	}
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(len(durs)), "allocs/search")
}
