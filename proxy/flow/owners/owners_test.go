package owners

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The registry keeps at most its limit, forgets the oldest first, ignores
// over-long ids, and is safe for concurrent use.
func TestResponseOwnersBound(t *testing.T) {
	r := newResponseOwners(3, nil)
	for i := 1; i <= 4; i++ {
		r.add(fmt.Sprintf("resp_%d", i), "b")
	}
	if _, ok := r.lookup("resp_1"); ok {
		t.Error("the oldest id is still known past the bound")
	}
	for i := 2; i <= 4; i++ {
		if up, ok := r.lookup(fmt.Sprintf("resp_%d", i)); !ok || up != "b" {
			t.Errorf("resp_%d: %q %v, want b", i, up, ok)
		}
	}
	r.add("resp_2", "c") // known: takes the new upstream, keeps its place
	r.add("resp_5", "b") // forgets resp_2, the oldest
	if _, ok := r.lookup("resp_2"); ok {
		t.Error("re-adding an id moved it: resp_2 should have been the oldest")
	}
	if up, _ := r.lookup("resp_3"); up != "b" || r.size() != 3 {
		t.Errorf("after wrapping: resp_3 on %q, size %d, want b and 3", up, r.size())
	}
	long := strings.Repeat("x", MaxIDBytes+1)
	r.add(long, "b")
	r.add("", "b")
	r.add("resp_6", "")
	if _, ok := r.lookup(long); ok || r.size() != 3 {
		t.Errorf("an over-long id was kept (size %d)", r.size())
	}
	if _, ok := r.lookup("resp_6"); ok {
		t.Error("an id without an upstream was kept")
	}
	if newResponseOwners(0, nil).limit != DefaultResponseOwners {
		t.Error("a zero limit is not DefaultResponseOwners")
	}

	// Concurrent writers and readers; the bound holds throughout.
	const limit = 64
	r = newResponseOwners(limit, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				id := fmt.Sprintf("resp_%d_%d", g, i)
				r.add(id, "up")
				r.lookup(id)
				if n := r.size(); n > limit {
					t.Errorf("size %d beyond the limit %d", n, limit)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := r.size(); n != limit {
		t.Errorf("size %d after 4,000 ids, want %d", n, limit)
	}
	if len(r.owner) != len(r.ring) {
		t.Errorf("map holds %d ids, ring %d", len(r.owner), len(r.ring))
	}
}

// BenchmarkResponseOwners is one learnt id and one lookup on a full
// registry of DefaultResponseOwners ids, 53 bytes each as OpenAI's are
// (idlen=53) or at the 128-byte bound; it reports the registry's heap.
func BenchmarkResponseOwners(b *testing.B) {
	for _, n := range []int{53, MaxIDBytes} {
		b.Run(fmt.Sprintf("idlen=%d", n), func(b *testing.B) {
			id := func(i int) string { return fmt.Sprintf("resp_%0*x", n-5, i) }
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			r := newResponseOwners(0, nil)
			for i := range DefaultResponseOwners {
				r.add(id(i), "backup")
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			ids := make([]string, 1024)
			for i := range ids {
				ids[i] = id(DefaultResponseOwners + i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.add(ids[i%len(ids)], "backup")
				r.lookup(ids[(i+512)%len(ids)])
			}
			b.StopTimer()
			b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, "heap-MB")
			runtime.KeepAlive(r)
		})
	}
}
