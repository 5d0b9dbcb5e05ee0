package embed

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/breakwater-dev/breakwater/lib/cputime"
)

// benchText returns a text of exactly n tokens (checked), built from
// ordinary English so the tokenizer cost is realistic.
func benchText(b *testing.B, e *Builtin, n int) string {
	b.Helper()
	words := strings.Fields("the quick brown fox jumps over the lazy dog while a man is slicing a cucumber in the kitchen and asks how to reset his password before the quarterly review meeting starts")
	var sb strings.Builder
	for i := 0; ; i++ {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[i%len(words)])
		if got := len(e.Tokenize(sb.String())); got == n {
			return sb.String()
		} else if got > n {
			// Trim with a trailing piece-sized fragment until exact.
			s := sb.String()
			for len(e.Tokenize(s)) > n {
				s = s[:len(s)-1]
			}
			if len(e.Tokenize(s)) != n {
				b.Fatalf("cannot build a %d-token text", n)
			}
			return s
		}
	}
}

func benchEmbed(b *testing.B, texts []string) {
	e := testBuiltin(b)
	ctx := context.Background()
	if _, err := e.Embed(ctx, texts); err != nil { // warm the scratch pool
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// reportCPU adds cpu-ns/op: process CPU time per op, which on a shared
// machine is steadier than wall time (ns/op includes waiting for a core).
// With -cpu 1 it is the single-core cost; with more workers it sums them.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if d := cputime.Process() - cpu0; d > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkBuiltin16Tokens(b *testing.B) {
	benchEmbed(b, []string{benchText(b, testBuiltin(b), 16)})
}

func BenchmarkBuiltin128Tokens(b *testing.B) {
	benchEmbed(b, []string{benchText(b, testBuiltin(b), 128)})
}

func BenchmarkBuiltinBatch32(b *testing.B) {
	e := testBuiltin(b)
	texts := make([]string, 32)
	for i := range texts {
		texts[i] = fmt.Sprintf("%s #%d", benchText(b, e, 12), i)
	}
	benchEmbed(b, texts)
}

func BenchmarkBuiltinTokenize128(b *testing.B) {
	e := testBuiltin(b)
	text := benchText(b, e, 128)
	s := new(tokScratch)
	b.ReportAllocs()
	for b.Loop() {
		e.tok.encode(text, s)
	}
}

func BenchmarkBuiltinLoad(b *testing.B) {
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := NewBuiltin(); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkBuiltinConcurrent16 is the semantic-miss load: 16 callers at
// once, each embedding its own 16-token question (run with -cpu 1 for one
// core). Concurrent calls share encoder passes; cpu-ns/op is per question.
func BenchmarkBuiltinConcurrent16(b *testing.B) {
	e := testBuiltin(b)
	base := benchText(b, e, 14)
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	cpu0 := cputime.Process()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			text := fmt.Sprintf("%s %d", base, seq.Add(1))
			if _, err := e.Embed(ctx, []string{text}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCPU(b, cpu0)
}

// BenchmarkBuiltinTokens is the encoder's cost against the length of the
// text (one text per call, one core with -cpu 1); see cpu-ns/op.
func BenchmarkBuiltinTokens(b *testing.B) {
	for _, n := range []int{4, 8, 16, 32, 64, 128} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			benchEmbed(b, []string{benchText(b, testBuiltin(b), n)})
		})
	}
}
