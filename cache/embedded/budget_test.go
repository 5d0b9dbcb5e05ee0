package embedded

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// bigItem is an entry with a prompt and an answer of size bytes each.
func bigItem(i, size, dim int, created time.Time, rng *rand.Rand) cache.IndexItem {
	vec := make([]float32, dim)
	for j := range vec {
		vec[j] = rng.Float32() - 0.5
	}
	label := fmt.Sprintf("prompt %d ", i)
	return cache.IndexItem{
		Entry: cache.Entry{
			Key: indextest.Key(label), Partition: "p", Fingerprint: "fp",
			Query: label + strings.Repeat("q", size), Model: "m", Body: []byte(strings.Repeat("a", size)),
			Created: created, Expires: created.Add(24 * time.Hour),
		},
		Vector: vec,
	}
}

func (x *Index) heldBytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.st.bytes
}

// Finding: 400 distinct 1 MB prompts took the index to 1.35 GB with no
// bound. MaxBytes now evicts the oldest entries, like the exact tier.
func TestMaxBytesEvictsOldest(t *testing.T) {
	const dim, size, n, budget = 64, 50 << 10, 100, 2 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: dim, EmbedderName: "test", MaxBytes: budget, MaxEntryBytes: 256 << 10, SweepEvery: -1}
	x, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	items := make([]cache.IndexItem, n)
	for i := range n {
		items[i] = bigItem(i, size, dim, t0.Add(time.Duration(i)*time.Millisecond), rng)
		upsert(t, x, items[i])
	}
	per := itemBytes(items[0].Entry, dim)
	if got := x.heldBytes(); got > budget {
		t.Errorf("index holds %d bytes, budget %d", got, budget)
	}
	kept := length(t, x)
	if want := int(budget / per); kept != want {
		t.Errorf("kept %d entries of %d bytes, want %d (budget %d)", kept, per, want, budget)
	}
	mustHave(t, x, items[n-kept:])
	if _, ok, _ := x.Get(t.Context(), items[n-kept-1].Entry.Key); ok {
		t.Errorf("the newest evicted entry is still there: eviction must take the oldest first")
	}

	// One entry above MaxEntryBytes is not kept, and evicts nothing.
	huge := bigItem(n, 200<<10, dim, t0.Add(time.Hour), rng)
	upsert(t, x, huge)
	if _, ok, _ := x.Get(t.Context(), huge.Entry.Key); ok {
		t.Errorf("an entry of %d bytes was kept, MaxEntryBytes %d", itemBytes(huge.Entry, dim), o.MaxEntryBytes)
	}
	if got := length(t, x); got != kept {
		t.Errorf("after the refused entry: %d entries, want %d", got, kept)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	// Replay keeps the same entries; a smaller budget evicts the oldest.
	y := open(t, o)
	if got := length(t, y); got != kept {
		t.Errorf("after restart: %d entries, want %d", got, kept)
	}
	mustHave(t, y, items[n-kept:])
	if err := y.Close(); err != nil {
		t.Fatal(err)
	}
	o.MaxBytes = budget / 2
	z := open(t, o)
	if got, want := length(t, z), int(o.MaxBytes/per); got != want {
		t.Errorf("reopened with half the budget: %d entries, want %d", got, want)
	}
	mustHave(t, z, items[n-int(o.MaxBytes/per):])
	if got := z.heldBytes(); got > o.MaxBytes {
		t.Errorf("reopened index holds %d bytes, budget %d", got, o.MaxBytes)
	}
}

// Finding: replaying the unbounded index at start took 678 MB of heap. A
// store written under a budget replays within it.
func TestReplayStaysWithinBudget(t *testing.T) {
	const dim, size, n, budget = 64, 50 << 10, 400, 4 << 20
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	o := Options{Path: dir, Dimension: dim, EmbedderName: "test", MaxBytes: budget, SweepEvery: -1}
	x, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for i := range n {
		upsert(t, x, bigItem(i, size, dim, t0.Add(time.Duration(i)*time.Millisecond), rng))
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak.Store(max(peak.Load(), m.HeapAlloc))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	y := open(t, o)
	close(stop)
	<-done
	grew := float64(peak.Load()-min(peak.Load(), base)) / (1 << 20)
	t.Logf("%d entries of %d KiB written, %d kept; replay peak heap growth %.1f MiB (budget %d MiB)", n, 2*size>>10, length(t, y), grew, budget>>20)
	if grew > 24 {
		t.Errorf("replay grew the heap by %.0f MiB, want under 24 MiB (budget %d MiB, %d MiB written)", grew, budget>>20, n*2*size>>20)
	}
}
