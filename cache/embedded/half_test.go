package embedded

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// TestDotHalfMatchesGeneric checks the dispatching dotHalf (the AVX2+F16C
// kernel where the CPU has it) against the portable loop for every length
// around the kernel's 32- and 8-wide steps, and 512.
func TestDotHalfMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range append(func() (ns []int) {
		for n := 0; n <= 70; n++ {
			ns = append(ns, n)
		}
		return ns
	}(), 512) {
		a, b, bf := make([]float32, n), make([]uint16, n), make([]float32, n)
		for i := range a {
			a[i] = r.Float32()*2 - 1
			b[i] = f32ToF16(r.Float32()*2 - 1)
			bf[i] = f16ToF32(b[i])
		}
		got, want := dotHalf(a, b), dotHalfGeneric(a, b)
		if math.Abs(float64(got-want)) > 1e-4 {
			t.Errorf("n=%d: dotHalf = %v, dotHalfGeneric = %v", n, got, want)
		}
		// Both must equal the float32 dot of the widened halves.
		if ref := dotGeneric(a, bf); math.Abs(float64(want-ref)) > 1e-4 {
			t.Errorf("n=%d: dotHalfGeneric = %v, float32 dot of the halves = %v", n, want, ref)
		}
	}
	t.Logf("half kernel in use: %v", halfKernel)
}

// TestToHalfMatchesGeneric checks the dispatching toHalf (VCVTPS2PH where
// the CPU has F16C) bit for bit against f32ToF16, for every length 0–70 and
// 512 and for rounding ties, subnormals, overflow and infinities.
func TestToHalfMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	special := []float32{0, float32(math.Copysign(0, -1)), 1 + 1.0/2048, 1 + 3.0/2048, 65504, 65520, 1e10, -1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)), 5.960464477539063e-08, 2.9802322387695312e-08, 6.097555160522461e-05, 1e-30}
	lengths := []int{512}
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		src := make([]float32, n)
		for i := range src {
			switch i % 4 {
			case 0:
				src[i] = special[r.IntN(len(special))]
			case 1:
				src[i] = (r.Float32()*2 - 1) * 1e-4 // subnormal halves
			default:
				src[i] = r.Float32()*2 - 1
			}
		}
		got, want := make([]uint16, n), make([]uint16, n)
		toHalf(got, src)
		toHalfGeneric(want, src)
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("n=%d: toHalf(%v) = %#04x, f32ToF16 gives %#04x", n, src[i], got[i], want[i])
			}
		}
	}
}

func TestHalfConversion(t *testing.T) {
	// Every finite half survives a round trip through float32.
	for h := range 1 << 16 {
		h := uint16(h)
		f := f16ToF32(h)
		if math.IsNaN(float64(f)) {
			if f32ToF16(f)&0x7c00 != 0x7c00 || f32ToF16(f)&0x3ff == 0 {
				t.Errorf("NaN %#04x did not stay NaN", h)
			}
			continue
		}
		if got := f32ToF16(f); got != h {
			t.Errorf("round trip of %#04x (%v) = %#04x", h, f, got)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{1 + 1.0/2048, 0x3c00},        // tie, rounds to even (down)
		{1 + 3.0/2048, 0x3c02},        // tie, rounds to even (up)
		{1 + 1.0/2048 + 1e-6, 0x3c01}, // above the tie
		{5.960464477539063e-08, 0x0001},
		{2.9802322387695312e-08, 0x0000}, // half the smallest subnormal: tie to even (0)
		{6.097555160522461e-05, 0x03ff},  // largest subnormal
		{6.103515625e-05, 0x0400},        // smallest normal
	} {
		if got := f32ToF16(c.f); got != c.want {
			t.Errorf("f32ToF16(%v) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

// TestGraphSearchExactScores checks that a graph search, which walks the
// half copy of the vectors, returns the exact float32 similarities, ranked
// by them, and that the half copy follows inserts into reused slots.
func TestGraphSearchExactScores(t *testing.T) {
	const n, dim = 1500, 48
	rng := rand.New(rand.NewPCG(8, 8))
	x := open(t, Options{Dimension: dim, FlatLimit: 64, M: 8, EfConstruction: 64, EfSearch: 32, SweepEvery: -1})
	now := time.Now()
	items := make([]cache.IndexItem, n)
	for i := range items {
		items[i] = newItem(fmt.Sprint("v", i), "A", indextest.RandomUnit(rng, dim), now)
	}
	upsert(t, x, items...)
	// Replace a third with new vectors: remove + insert into reused slots.
	for i := 0; i < n; i += 3 {
		items[i].Vector = indextest.RandomUnit(rng, dim)
	}
	for i := 0; i < n; i += 300 {
		var batch []cache.IndexItem
		for j := i; j < i+300; j += 3 {
			batch = append(batch, items[j])
		}
		upsert(t, x, batch...)
	}
	b := x.st.buckets[bucketKey{"A", "fp"}]
	if b == nil || b.g == nil {
		t.Fatal("bucket has no graph above FlatLimit")
	}
	if b.vecs.withHalf != useHalf {
		t.Fatalf("withHalf = %v, want %v", b.vecs.withHalf, useHalf)
	}
	if b.vecs.withHalf {
		for slot, it := range b.items {
			if it == nil {
				continue
			}
			v, h := b.vecs.at(int32(slot)), b.vecs.halfAt(int32(slot))
			for j := range v {
				if h[j] != f32ToF16(v[j]) {
					t.Fatalf("slot %d: half copy out of date at %d", slot, j)
				}
			}
		}
	}
	for range 50 {
		q := indextest.Perturb(rng, items[rng.IntN(n)].Vector, 0.3)
		ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: q, Threshold: -1, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 10 {
			t.Fatalf("got %d matches, want 10", len(ms))
		}
		for i, m := range ms {
			it := x.st.byKey[m.Entry.Key]
			if want := dot(normalize(q), b.vecs.at(it.slot)); m.Score != want {
				t.Errorf("match %d: score %v, want exact %v", i, m.Score, want)
			}
			if i > 0 && m.Score > ms[i-1].Score {
				t.Errorf("match %d: score %v above the previous %v", i, m.Score, ms[i-1].Score)
			}
		}
	}
}

// TestSnapshotLongerLinksThanM reopens a graph saved with M=16 under M=4:
// its layer-0 lists (up to 32 links) are longer than the new maximum (8),
// and must load whole into the inline layer-0 array, search as before, and
// be pruned to the new maximum as the graph changes.
func TestSnapshotLongerLinksThanM(t *testing.T) {
	const n, dim = 600, 16
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	o := Options{Path: dir, Dimension: dim, EmbedderName: "t", FlatLimit: 32, M: 16, EfSearch: 64, SweepEvery: -1}
	x, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	items := make([]cache.IndexItem, n)
	for i := range items {
		items[i] = newItem(fmt.Sprint("v", i), "A", indextest.RandomUnit(rng, dim), now)
	}
	upsert(t, x, items...)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	o.M = 4
	x = open(t, o)
	b := x.st.buckets[bucketKey{"A", "fp"}]
	if b == nil || b.g == nil {
		t.Fatal("no graph after reopen")
	}
	if b.g.stride0 <= 2*4+1 {
		t.Fatalf("stride0 = %d: the M=16 lists should not fit 8 links", b.g.stride0)
	}
	longest := 0
	for slot := range b.items {
		if b.g.has(int32(slot), 0) {
			longest = max(longest, len(b.g.links(int32(slot), 0)))
		}
	}
	if longest <= 8 {
		t.Fatalf("longest layer-0 list %d: links were truncated on load", longest)
	}
	found := func() int {
		hits := 0
		for _, it := range items {
			ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: it.Vector, Threshold: 0.99})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 1 && ms[0].Entry.Key == it.Entry.Key {
				hits++
			}
		}
		return hits
	}
	if got := found(); got < n*99/100 {
		t.Errorf("after reopen: %d of %d vectors find themselves", got, n)
	}
	// Replace a third: links are removed, added and pruned at the new M.
	for i := 0; i < n; i += 3 {
		items[i].Vector = indextest.RandomUnit(rng, dim)
	}
	for i := 0; i < n; i += 3 {
		upsert(t, x, items[i])
	}
	if got := found(); got < n*95/100 {
		t.Errorf("after replacements: %d of %d vectors find themselves", got, n)
	}
}
