package cache

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func newExact(t testing.TB, maxBytes int64) *Exact {
	t.Helper()
	x, err := NewExact(maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(x.Close)
	return x
}

func entry(key, partition, body string) Entry {
	return Entry{Key: key, Partition: partition, Body: []byte(body), Created: time.Now()}
}

func TestExactSetGet(t *testing.T) {
	x := newExact(t, 1<<20)
	now := time.Now()
	if _, ok := x.Get("k", now); ok {
		t.Fatal("Get on an empty tier hit")
	}
	x.Set(entry("k", "p", "body"))
	e, ok := x.Get("k", now)
	if !ok {
		t.Fatal("Get right after Set missed")
	}
	if got, want := string(e.Body), "body"; got != want {
		t.Errorf("Body = %q, want %q", got, want)
	}
	x.Set(entry("k", "p", "newer"))
	if e, _ := x.Get("k", now); string(e.Body) != "newer" {
		t.Errorf("Body after overwrite = %q, want %q", e.Body, "newer")
	}
	if got, want := x.Len(), 1; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

func TestExactTTL(t *testing.T) {
	x := newExact(t, 1<<20)
	now := time.Now()

	e := entry("clock", "p", "b")
	e.Expires = now.Add(time.Hour)
	x.Set(e)
	if _, ok := x.Get("clock", now.Add(59*time.Minute)); !ok {
		t.Error("entry missed before it expired")
	}
	if _, ok := x.Get("clock", now.Add(time.Hour)); ok {
		t.Error("entry hit at its expiry time")
	}

	// Ristretto's own TTL, on the real clock, also drops it.
	short := entry("short", "p", "b")
	short.Expires = time.Now().Add(50 * time.Millisecond)
	x.Set(short)
	time.Sleep(100 * time.Millisecond)
	if _, ok := x.Get("short", time.Time{}); ok {
		t.Error("entry past its ristretto TTL hit")
	}

	past := entry("past", "p", "b")
	past.Expires = now.Add(-time.Second)
	x.Set(past)
	if _, ok := x.Get("past", time.Time{}); ok {
		t.Error("an already expired entry was stored")
	}
}

func TestExactByteBound(t *testing.T) {
	const maxBytes = 20_000
	x := newExact(t, maxBytes)
	body := strings.Repeat("x", 1000)
	const n = 200
	for i := range n {
		x.Set(entry(fmt.Sprintf("key-%03d", i), "p", body))
	}
	hits := int64(0)
	size := int64(0)
	for i := range n {
		if e, ok := x.Get(fmt.Sprintf("key-%03d", i), time.Now()); ok {
			hits++
			size += e.Size()
		}
	}
	if hits == 0 || hits == n {
		t.Errorf("%d of %d entries hit; want some but not all", hits, n)
	}
	if size > maxBytes {
		t.Errorf("entries held take %d bytes, more than the bound %d", size, maxBytes)
	}
	if _, err := NewExact(0); err == nil {
		t.Error("NewExact(0) succeeded, want an error")
	}
}

func TestExactDeletePartition(t *testing.T) {
	x := newExact(t, 1<<20)
	now := time.Now()
	for _, p := range []string{"a", "b"} {
		for i := range 3 {
			x.Set(entry(fmt.Sprintf("%s-%d", p, i), p, "v"))
		}
	}
	x.DeletePartition("a")
	for i := range 3 {
		if _, ok := x.Get(fmt.Sprintf("a-%d", i), now); ok {
			t.Errorf("a-%d hit after flushing a", i)
		}
		if _, ok := x.Get(fmt.Sprintf("b-%d", i), now); !ok {
			t.Errorf("b-%d missed after flushing a", i)
		}
	}
	if got, want := x.Len(), 3; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	// Entries written after a flush are served.
	x.Set(entry("a-new", "a", "v"))
	if _, ok := x.Get("a-new", now); !ok {
		t.Error("entry stored after the flush missed")
	}
	x.DeletePartition("")
	if _, ok := x.Get("b-0", now); ok {
		t.Error("b-0 hit after flushing everything")
	}
	if _, ok := x.Get("a-new", now); ok {
		t.Error("a-new hit after flushing everything")
	}
	if got, want := x.Len(), 0; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

func TestExactClose(t *testing.T) {
	x, err := NewExact(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	x.Set(entry("k", "p", "v"))
	x.Close()
	x.Close()
	if _, ok := x.Get("k", time.Now()); ok {
		t.Error("closed tier hit")
	}
	x.Set(entry("k", "p", "v")) // must not panic
}

// BenchmarkExactSet measures what the synchronous visibility of Set costs:
// "wait" is Set as used (SetWithTTL + Wait), "nowait" is SetWithTTL alone.
func BenchmarkExactSet(b *testing.B) {
	body := strings.Repeat("x", 2000)
	b.Run("wait", func(b *testing.B) {
		x := newExact(b, 256<<20)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			x.Set(entry(fmt.Sprint(i), "p", body))
		}
	})
	b.Run("nowait", func(b *testing.B) {
		x := newExact(b, 256<<20)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			e := entry(fmt.Sprint(i), "p", body)
			x.c.SetWithTTL(e.Key, &exactItem{e: e}, e.Size(), 0)
		}
	})
}

func BenchmarkExactGet(b *testing.B) {
	x := newExact(b, 64<<20)
	x.Set(entry("k", "p", "v"))
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		x.Get("k", now)
	}
}

func TestExactCloseConcurrent(t *testing.T) {
	x, err := NewExact(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				k := fmt.Sprintf("%d-%d", g, i)
				x.Set(entry(k, "p", "v"))
				x.Get(k, time.Now())
				if i%50 == 0 {
					x.DeletePartition("p")
				}
			}
		})
	}
	time.Sleep(time.Millisecond)
	x.Close()
	wg.Wait()
	if _, ok := x.Get("0-0", time.Now()); ok {
		t.Error("closed tier hit")
	}
}
