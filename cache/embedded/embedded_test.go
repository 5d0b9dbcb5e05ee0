package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

func open(t *testing.T, o Options) *Index {
	t.Helper()
	x, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func TestContract(t *testing.T) {
	tests := []struct {
		name string
		opts func(t *testing.T, dim int) Options
	}{
		{"memory", func(t *testing.T, dim int) Options { return Options{Dimension: dim} }},
		{"disk", func(t *testing.T, dim int) Options {
			return Options{Dimension: dim, Path: t.TempDir(), EmbedderName: "test"}
		}},
		// FlatLimit 8 puts every bucket of more than 8 entries on an HNSW
		// graph; EfSearch 512 makes the graph search exhaustive at the
		// suite's sizes, so the suite's exact-ranking checks still apply.
		{"graph", func(t *testing.T, dim int) Options {
			return Options{Dimension: dim, FlatLimit: 8, EfSearch: 512, Path: t.TempDir()}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			indextest.Run(t, func(t *testing.T, dim int) cache.Index { return open(t, tc.opts(t, dim)) })
		})
	}
}

func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := range 40 {
		a, b := make([]float32, n), make([]float32, n)
		var want float64
		for i := range a {
			a[i], b[i] = rng.Float32()-0.5, rng.Float32()-0.5
			want += float64(a[i]) * float64(b[i])
		}
		if got := dot(a, b); math.Abs(float64(got)-want) > 1e-5 {
			t.Errorf("dot of %d: got %v, want %v", n, got, want)
		}
	}
}

// item builds a test item whose entry is created at created.
func newItem(label, partition string, vec []float32, created time.Time) cache.IndexItem {
	return cache.IndexItem{
		Entry: cache.Entry{
			Key: indextest.Key(label), Partition: partition, Fingerprint: "fp",
			Query: label, Model: "m", Body: []byte(`{"q":"` + label + `"}`),
			Created: created, Expires: created.Add(24 * time.Hour),
		},
		Vector: vec,
	}
}

func upsert(t *testing.T, x *Index, items ...cache.IndexItem) {
	t.Helper()
	if err := x.Upsert(t.Context(), items); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func length(t testing.TB, x *Index) int {
	t.Helper()
	n, err := x.Len(t.Context())
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	return n
}

func mustHave(t *testing.T, x *Index, items []cache.IndexItem) {
	t.Helper()
	for _, it := range items {
		e, ok, err := x.Get(t.Context(), it.Entry.Key)
		if err != nil || !ok {
			t.Fatalf("Get(%s) = %v, %v; want the entry", it.Entry.Query, ok, err)
		}
		if e.Query != it.Entry.Query || string(e.Body) != string(it.Entry.Body) || e.User != it.Entry.User || e.Agreed != it.Entry.Agreed {
			t.Fatalf("Get(%s) = %q %q user %q agreed %v, want %q %q user %q agreed %v", it.Entry.Query, e.Query, e.Body, e.User, e.Agreed,
				it.Entry.Query, it.Entry.Body, it.Entry.User, it.Entry.Agreed)
		}
	}
}

func TestRestart(t *testing.T) {
	const dim = 16
	rng := rand.New(rand.NewPCG(2, 2))
	now := time.Now()
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: dim, EmbedderName: "e1", FlatLimit: 64}
	var big, small []cache.IndexItem
	for i := range 500 {
		big = append(big, newItem(fmt.Sprint("big", i), "A", indextest.RandomUnit(rng, dim), now))
	}
	for i := range 20 {
		small = append(small, newItem(fmt.Sprint("small", i), "B", indextest.RandomUnit(rng, dim), now))
		// End users and agreement survive the log and the snapshot; a
		// batch mixes entries with and without them.
		if i%3 != 0 {
			small[i].Entry.User = fmt.Sprintf("user-hash-%d", i%4)
		}
		small[i].Entry.Agreed = i%2 == 0
	}
	gone := newItem("gone", "C", indextest.RandomUnit(rng, dim), now)

	tests := []struct {
		name  string
		write func(t *testing.T, x *Index)
	}{
		{"log only", func(t *testing.T, x *Index) {
			upsert(t, x, big...)
			upsert(t, x, small...)
			upsert(t, x, gone)
		}},
		{"snapshot then log", func(t *testing.T, x *Index) {
			upsert(t, x, big[:300]...)
			upsert(t, x, gone)
			if err := x.Compact(); err != nil {
				t.Fatalf("Compact: %v", err)
			}
			upsert(t, x, big[300:]...)
			upsert(t, x, small...)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o.Path = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			x := open(t, o)
			tc.write(t, x)
			if err := x.DeletePartition(t.Context(), "C"); err != nil {
				t.Fatalf("DeletePartition: %v", err)
			}
			if err := x.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for round := range 2 { // the second round reopens the snapshot Close wrote
				x = open(t, o)
				if got, want := length(t, x), len(big)+len(small); got != want {
					t.Fatalf("round %d: Len = %d, want %d", round, got, want)
				}
				mustHave(t, x, big)
				mustHave(t, x, small)
				if _, ok, _ := x.Get(t.Context(), gone.Entry.Key); ok {
					t.Errorf("round %d: deleted partition came back", round)
				}
				for i, it := range big[:50] {
					ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: indextest.Perturb(rng, it.Vector, 0.02), Threshold: 0.9})
					if err != nil {
						t.Fatalf("Search: %v", err)
					}
					if len(ms) != 1 || ms[0].Entry.Key != it.Entry.Key {
						t.Errorf("round %d: search %d found %d matches, want big%d", round, i, len(ms), i)
					}
				}
				if err := x.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
		})
	}
}

// writeLog builds a store by hand: a manifest and one log of n single-item
// upserts. It returns the log's path, its bytes, the offset where the last
// record starts and the items.
func writeLog(t *testing.T, dir string, o Options, n int) (string, []byte, int, []cache.IndexItem) {
	t.Helper()
	if err := checkManifest(dir, o); err != nil {
		t.Fatal(err)
	}
	w, err := createWAL(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	var items []cache.IndexItem
	last := 0
	for i := range n {
		it := newItem(fmt.Sprint("rec", i), "A", indextest.RandomUnit(rng, o.Dimension), time.Now())
		items = append(items, it)
		last = int(w.size)
		if err := w.append(encodeUpsert([]cache.IndexItem{it}), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, walName(1))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data, last, items
}

func TestTornTail(t *testing.T) {
	o := Options{Dimension: 4, EmbedderName: "e", SweepEvery: -1, Logger: slog.New(slog.DiscardHandler)}
	src := t.TempDir()
	_, data, last, items := writeLog(t, src, o, 5)
	manifest, err := os.ReadFile(filepath.Join(src, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte("\x17\x00\x00\x00garbage after a crash\xff\xfe")

	type variant struct {
		name   string
		log    []byte
		want   int  // intact records
		reopen bool // also append after the truncation and reopen (slower: fsyncs)
	}
	var tests []variant
	for cut := last; cut < len(data); cut++ {
		tests = append(tests, variant{fmt.Sprint("cut at ", cut), data[:cut], 4, cut%16 == 0})
		tests = append(tests, variant{fmt.Sprint("cut at ", cut, " plus garbage"), append(slices.Clip(data[:cut]), garbage...), 4, cut%16 == 8})
	}
	tests = append(tests,
		variant{"whole log plus garbage", append(slices.Clip(data), garbage...), 5, true},
		variant{"whole log plus zeros", append(slices.Clip(data), make([]byte, 64)...), 5, true},
		variant{"header only", data[:len(walMagic)], 0, true},
		variant{"torn header", data[:3], 0, true},
	)
	flipped := slices.Clone(data)
	flipped[len(flipped)-2] ^= 0xff // corrupt the last record's payload: CRC mismatch
	tests = append(tests, variant{"bit flip in last record", flipped, 4, true})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := o
			o.Path = t.TempDir()
			if err := os.WriteFile(filepath.Join(o.Path, manifestName), manifest, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(o.Path, walName(1)), tc.log, 0o644); err != nil {
				t.Fatal(err)
			}
			x := open(t, o)
			if got := length(t, x); got != tc.want {
				t.Fatalf("Len = %d, want %d", got, tc.want)
			}
			mustHave(t, x, items[:tc.want])
			if !tc.reopen {
				return
			}
			// The truncated log takes appends that survive a reopen.
			upsert(t, x, items[4])
			if err := x.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			x = open(t, o)
			mustHave(t, x, append(slices.Clip(items[:tc.want]), items[4]))
		})
	}
}

func TestMismatch(t *testing.T) {
	dir := t.TempDir()
	x := open(t, Options{Path: dir, Dimension: 8, EmbedderName: "builtin:a"})
	upsert(t, x, newItem("x", "A", make([]float32, 8), time.Now()))
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		embedder     string
		dim          int
		wantEmbedder bool
		wantDim      bool
	}{
		{"same", "builtin:a", 8, false, false},
		{"other embedder", "openai:b", 8, true, false},
		{"other dimension", "builtin:a", 16, false, true},
		{"both", "openai:b", 16, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Open(Options{Path: dir, Dimension: tc.dim, EmbedderName: tc.embedder})
			if err == nil {
				x.Close()
			}
			if got, want := errors.Is(err, cache.ErrEmbedderMismatch), tc.wantEmbedder; got != want {
				t.Errorf("errors.Is(%v, ErrEmbedderMismatch) = %v, want %v", err, got, want)
			}
			if got, want := errors.Is(err, cache.ErrDimension), tc.wantDim; got != want {
				t.Errorf("errors.Is(%v, ErrDimension) = %v, want %v", err, got, want)
			}
			if err != nil && !strings.Contains(err.Error(), "point vector.path elsewhere or delete it") {
				t.Errorf("error %q does not say what to do", err)
			}
			if err != nil && !strings.Contains(err.Error(), `"builtin:a" (dim 8)`) {
				t.Errorf("error %q does not name the store's embedder and dimension", err)
			}
		})
	}
}

func TestSecondOpenLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, Options{Path: dir, Dimension: 4})
	if x, err := Open(Options{Path: dir, Dimension: 4}); err == nil {
		x.Close()
		t.Fatal("second Open of the same path succeeded, want a lock error")
	}
}

func TestEviction(t *testing.T) {
	const max, n = 10, 25
	rng := rand.New(rand.NewPCG(4, 4))
	base := time.Now()
	order := rng.Perm(n) // upsert in random order: eviction follows Created, not arrival
	for _, path := range []string{"", "disk"} {
		t.Run("path="+path, func(t *testing.T) {
			o := Options{Dimension: 8, MaxEntries: max, FlatLimit: 4}
			if path != "" {
				o.Path = t.TempDir()
			}
			x := open(t, o)
			items := make([]cache.IndexItem, n)
			for _, i := range order {
				items[i] = newItem(fmt.Sprint("e", i), "A", indextest.RandomUnit(rng, 8), base.Add(time.Duration(i)*time.Second))
				upsert(t, x, items[i])
				if got := length(t, x); got > max {
					t.Fatalf("Len = %d, above MaxEntries %d", got, max)
				}
			}
			if got, want := length(t, x), max; got != want {
				t.Fatalf("Len = %d, want %d", got, want)
			}
			// An entry is evicted only while max newer ones are present, so
			// whatever the arrival order the survivors are the max newest.
			var kept []int
			for i, it := range items {
				if _, ok, _ := x.Get(t.Context(), it.Entry.Key); ok {
					kept = append(kept, i)
				}
			}
			if want := []int{15, 16, 17, 18, 19, 20, 21, 22, 23, 24}; !slices.Equal(kept, want) {
				t.Errorf("kept %v, want %v", kept, want)
			}
			ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "A", Fingerprint: "fp", Vector: items[kept[0]].Vector, Threshold: 0.99})
			if err != nil || len(ms) != 1 {
				t.Errorf("Search for a kept entry = %d matches, %v; want 1", len(ms), err)
			}
			if path == "" {
				return
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			x = open(t, o)
			if got, want := length(t, x), max; got != want {
				t.Errorf("Len after reopen = %d, want %d", got, want)
			}
		})
	}
}

func TestTTLSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	now := time.Now()
	x := open(t, Options{Dimension: 8, SweepEvery: -1})
	var items []cache.IndexItem
	for i := range 10 {
		it := newItem(fmt.Sprint("t", i), "A", indextest.RandomUnit(rng, 8), now)
		it.Entry.Expires = now.Add(time.Duration(i+1) * time.Minute)
		items = append(items, it)
	}
	upsert(t, x, items...)
	tests := []struct {
		at        time.Duration
		swept, ln int
	}{
		{0, 0, 10},
		{90 * time.Second, 1, 9},
		{5 * time.Minute, 4, 5},
		{time.Hour, 5, 0},
	}
	for _, tc := range tests {
		if got, want := x.Sweep(now.Add(tc.at)), tc.swept; got != want {
			t.Errorf("Sweep(+%v) = %d, want %d", tc.at, got, want)
		}
		if got, want := length(t, x), tc.ln; got != want {
			t.Errorf("Len after Sweep(+%v) = %d, want %d", tc.at, got, want)
		}
	}

	t.Run("background", func(t *testing.T) {
		x := open(t, Options{Dimension: 8, SweepEvery: 10 * time.Millisecond})
		it := newItem("soon", "A", indextest.RandomUnit(rng, 8), time.Now())
		it.Entry.Expires = time.Now().Add(50 * time.Millisecond)
		upsert(t, x, it)
		deadline := time.Now().Add(5 * time.Second)
		for length(t, x) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("sweeper did not remove the expired entry")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestCompactionBoundsLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: 16, CompactBytes: 16 << 10, SweepEvery: -1}
	x := open(t, o)
	var items []cache.IndexItem
	for i := range 400 {
		it := newItem(fmt.Sprint("c", i), "A", indextest.RandomUnit(rng, 16), time.Now())
		items = append(items, it)
		upsert(t, x, it)
	}
	// Compaction runs in the background; wait for the log to shrink.
	deadline := time.Now().Add(10 * time.Second)
	for {
		x.writeMu.Lock()
		size := x.wal.size
		x.writeMu.Unlock()
		if size < 2*o.CompactBytes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log is %d bytes, want compaction below %d", size, 2*o.CompactBytes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotName)); err != nil {
		t.Fatalf("no snapshot after compaction: %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	gens, err := walGens(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(gens), 1; got != want {
		t.Errorf("%d logs after Close, want %d", got, want)
	}
	x = open(t, o)
	mustHave(t, x, items)
}

func TestCorruptSnapshot(t *testing.T) {
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: 8, EmbedderName: "e"}
	x := open(t, o)
	upsert(t, x, newItem("a", "A", indextest.RandomUnit(rand.New(rand.NewPCG(9, 9)), 8), time.Now()))
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, snapshotName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A snapshot is only ever renamed into place whole and fsynced, so a bad
	// one is real damage: refuse it rather than start with a partial cache.
	if x, err := Open(o); err == nil {
		x.Close()
		t.Fatal("Open of a corrupt snapshot succeeded")
	} else if !strings.Contains(err.Error(), "verify snapshot") {
		t.Errorf("Open error = %v, want it to name the snapshot check", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	x := open(t, Options{Dimension: 4, Path: t.TempDir()})
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, _, getErr := x.Get(ctx, "k")
	_, searchErr := x.Search(ctx, cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: make([]float32, 4)})
	_, lenErr := x.Len(ctx)
	tests := []struct {
		name string
		err  error
	}{
		{"Upsert", x.Upsert(ctx, []cache.IndexItem{newItem("k", "p", make([]float32, 4), time.Now())})},
		{"Search", searchErr},
		{"Get", getErr},
		{"DeletePartition", x.DeletePartition(ctx, "p")},
		{"Len", lenErr},
		{"Compact", x.Compact()},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", tc.name, tc.err)
		}
	}
}

// A store written before entries carried an end user (opUpsert records and
// slot tag 1, which a deployment without identities still writes) loads,
// its entries the anonymous user's and unagreed; an entry with a user is
// written in the newer form.
func TestOldRecordsLoadAsAnonymous(t *testing.T) {
	o := Options{Path: t.TempDir(), Dimension: 8, EmbedderName: "e1"}
	_, _, _, items := writeLog(t, o.Path, o, 3)
	x := open(t, o)
	mustHave(t, x, items)
	if e, _, _ := x.Get(t.Context(), items[0].Entry.Key); e.User != "" || e.Agreed {
		t.Errorf("old entry: user %q agreed %v, want anonymous and unagreed", e.User, e.Agreed)
	}
	if got := encodeUpsert(items[:1])[0]; got != opUpsert {
		t.Errorf("an entry without a user is written with op %d, want %d (readable by earlier builds)", got, opUpsert)
	}
	withUser := items[0]
	withUser.Entry.User = "h"
	if got := encodeUpsert([]cache.IndexItem{items[1], withUser})[0]; got != opUpsertUsers {
		t.Errorf("a batch with a user is written with op %d, want %d", got, opUpsertUsers)
	}
}
