package app

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/lib/logtest"
)

// TestLogBufferWritesEveryLineInOrder: lines from many goroutines all
// arrive, whole, without an explicit flush (the timer), and Close writes
// the rest.
func TestLogBufferWritesEveryLineInOrder(t *testing.T) {
	var out logtest.Buffer
	lb := newLogBuffer(&out)
	log := NewLogger(lb, "info", "json")
	const writers, lines = 8, 2000 // more than logFlushBytes in all
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				log.Info("request", "writer", w, "line", i)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < writers*lines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := out.String()
	if n := strings.Count(got, "\n"); n != writers*lines {
		t.Fatalf("%d lines written, want %d", n, writers*lines)
	}
	for w := range writers {
		last := -1
		for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
			var i int
			if _, err := fmt.Sscanf(l[strings.Index(l, `"writer":`):], `"writer":%d,"line":%d}`, new(int), &i); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			if strings.Contains(l, fmt.Sprintf(`"writer":%d,`, w)) {
				if i != last+1 {
					t.Fatalf("writer %d: line %d after %d", w, i, last)
				}
				last = i
			}
		}
	}
	lb.Write([]byte("after\n"))
	lb.Close()
	if !strings.HasSuffix(out.String(), "after\n") {
		t.Error("Close did not flush the last line")
	}
}

// TestLogBufferBackPressure: a burst larger than logMaxPending is written
// by the writers themselves rather than held without bound.
func TestLogBufferBackPressure(t *testing.T) {
	var out logtest.Buffer
	lb := newLogBuffer(&out)
	defer lb.Close()
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for range 2 * logMaxPending / len(line) {
		lb.Write(line)
		lb.mu.Lock()
		n := len(lb.buf)
		lb.mu.Unlock()
		if n > logMaxPending {
			t.Fatalf("%d bytes pending, bound %d", n, logMaxPending)
		}
	}
}
