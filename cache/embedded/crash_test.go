package embedded

import (
	"bufio"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/indextest"
)

// childEnv names the store directory when the test binary runs as the
// writer that TestKill9 kills.
const childEnv = "BREAKWATER_EMBEDDED_KILL9_DIR"

// crashOptions are shared by the writer and the reopening parent. A small
// CompactBytes makes the writer compact often, so the kill can land in the
// middle of a snapshot as well as of a log append.
func crashOptions(dir string) Options {
	return Options{Path: dir, Dimension: 64, EmbedderName: "kill9", FlatLimit: 128, CompactBytes: 256 << 10, Logger: slog.New(slog.DiscardHandler)}
}

// TestKill9 re-executes the test binary as a writer that upserts in a loop,
// kills it with SIGKILL mid-write, and checks that the store opens, with
// every entry intact, and takes new writes.
func TestKill9(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		runWriter(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("skipped by go test -short (no variable enables it: it runs whenever -short is absent, as in CI); it spawns a subprocess")
	}
	dir := t.TempDir()
	before := 0            // entries the earlier rounds left
	for round := range 2 { // each round writes on top of what the last kill left
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestKill9$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start writer: %v", err)
		}
		sc := bufio.NewScanner(out)
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "writing") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: writer did not start: %q", round, sc.Text())
		}
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill writer: %v", err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: writer was not killed by SIGKILL: %v", round, err)
		}

		x, err := Open(crashOptions(dir))
		if err != nil {
			t.Fatalf("round %d: Open after kill -9: %v", round, err)
		}
		n := length(t, x)
		if n == 0 {
			t.Fatalf("round %d: no entries survived", round)
		}
		// Every surviving entry is whole and findable by its own vector.
		// This round wrote keys 0, 1, 2, ... in order, and fewer than n
		// survive, so keys below n cover every survivor; counting them
		// also catches an entry that Len counts but Get cannot find.
		checked := 0
		for i := range n {
			e, ok, err := x.Get(t.Context(), indextest.Key(fmt.Sprint("k", round, "-", i)))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			if got, want := string(e.Body), body(i); got != want {
				t.Fatalf("round %d: entry %d has body of %d bytes, want %d", round, i, len(got), len(want))
			}
			ms, err := x.Search(t.Context(), cache.SearchQuery{Partition: "p", Fingerprint: "f", Vector: vector(round, i), Threshold: 0.999})
			if err != nil || len(ms) != 1 {
				t.Fatalf("round %d: Search for entry %d: %d matches, %v", round, i, len(ms), err)
			}
			checked++
		}
		t.Logf("round %d: %d entries after kill -9, %d from this round", round, n, checked)
		if n < DefaultMaxEntries && checked != n-before { // below the bound nothing was evicted
			t.Errorf("round %d: %d entries found by key, want %d (%d in all, %d from earlier rounds)", round, checked, n-before, n, before)
		}
		before = n
		if err := x.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func body(i int) string {
	return fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 200+i%1000))
}

func vector(round, i int) []float32 {
	return indextest.RandomUnit(rand.New(rand.NewPCG(uint64(round), uint64(i))), 64)
}

// runWriter is the child: upsert forever until killed.
func runWriter(t *testing.T, dir string) {
	x, err := Open(crashOptions(dir))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	round := 0
	for n, err := x.Len(t.Context()); err == nil && n > 0; n-- {
		if _, ok, _ := x.Get(t.Context(), indextest.Key(fmt.Sprint("k", round, "-", 0))); !ok {
			break
		}
		round++
	}
	fmt.Println("writing round", round)
	now := time.Now()
	for i := 0; ; i++ {
		it := cache.IndexItem{
			Entry: cache.Entry{
				Key: indextest.Key(fmt.Sprint("k", round, "-", i)), Partition: "p", Fingerprint: "f",
				Query: fmt.Sprint("q", i), Model: "m", Body: []byte(body(i)), Created: now, Expires: now.Add(time.Hour),
			},
			Vector: vector(round, i),
		}
		if err := x.Upsert(t.Context(), []cache.IndexItem{it}); err != nil {
			fmt.Println("upsert:", err)
			os.Exit(2)
		}
	}
}
