package embed

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	builtinOnce sync.Once
	builtinVal  *Builtin
	builtinErr  error
)

// testBuiltin loads the embedded model once per test binary.
func testBuiltin(tb testing.TB) *Builtin {
	tb.Helper()
	builtinOnce.Do(func() { builtinVal, builtinErr = NewBuiltin() })
	if builtinErr != nil {
		tb.Fatalf("NewBuiltin: %v", builtinErr)
	}
	return builtinVal
}

type reference struct {
	Text   string    `json:"text"`
	IDs    []int     `json:"ids"`
	Vector []float32 `json:"vector"`
}

// loadReference reads vectors produced by the package's own JavaScript
// runtime (@energetic-ai/embeddings@0.2.0).
func loadReference(tb testing.TB) []reference {
	tb.Helper()
	f, err := os.Open("testdata/use-lite-reference.jsonl")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var refs []reference
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r reference
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		refs = append(refs, r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(refs) == 0 {
		tb.Fatal("no reference vectors")
	}
	return refs
}

func builtinCosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func TestBuiltinTokenizeMatchesReference(t *testing.T) {
	b := testBuiltin(t)
	for _, r := range loadReference(t) {
		if got := b.Tokenize(r.Text); !slices.Equal(got, r.IDs) {
			t.Errorf("Tokenize(%q)\n got %v\nwant %v", r.Text, got, r.IDs)
		}
	}
}

var (
	builtinF16Once sync.Once
	builtinF16Val  *Builtin
	builtinF16Err  error
)

// testBuiltinF16 loads the model without the bf16 kernels (half-float or
// float32 weights, fp32 arithmetic), once per test binary.
func testBuiltinF16(tb testing.TB) *Builtin {
	tb.Helper()
	builtinF16Once.Do(func() { builtinF16Val, builtinF16Err = newBuiltin(useLiteEN, false) })
	if builtinF16Err != nil {
		tb.Fatalf("newBuiltin: %v", builtinF16Err)
	}
	return builtinF16Val
}

// TestBuiltinParity compares the vectors of the reference texts with the
// JavaScript runtime's. The fp32 kernels (half-float weights widened
// exactly) agree to 1e-4 in cosine. The bf16 kernel rounds weights and
// activations to 8 bits of mantissa: measured min cosine 0.99995; the bound
// 0.999 still fails a kernel that reads a wrong panel or drops a k-pair
// (cosines near 0.9 or below).
func TestBuiltinParity(t *testing.T) {
	refs := loadReference(t)
	texts := make([]string, len(refs))
	for i, r := range refs {
		texts[i] = r.Text
	}
	vectors := map[string][][]float32{}
	for _, tc := range []struct {
		name   string
		bf16   bool
		minCos float64
	}{
		{"fp32", false, 0.9999},
		{"bf16", true, 0.999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBuiltinF16(t)
			if tc.bf16 {
				if !haveBF16 {
					t.Skip("this CPU (or a purego build) has no AVX512_BF16 kernel (no variable enables it: it runs wherever the CPU has the feature)")
				}
				b = testBuiltin(t)
				if b.model.head.wb == nil {
					t.Fatal("NewBuiltin did not select the bf16 kernel on a CPU with AVX512_BF16")
				}
			}
			got, err := b.Embed(t.Context(), texts)
			if err != nil {
				t.Fatal(err)
			}
			vectors[tc.name] = got
			minCos, sumCos, maxDiff := 1.0, 0.0, 0.0
			for i, r := range refs {
				if len(got[i]) != b.Dimension() {
					t.Fatalf("vector %d has %d floats", i, len(got[i]))
				}
				c := builtinCosine(got[i], r.Vector)
				minCos = min(minCos, c)
				sumCos += c
				for j := range r.Vector {
					maxDiff = max(maxDiff, math.Abs(float64(got[i][j]-r.Vector[j])))
				}
				if c < tc.minCos {
					t.Errorf("builtinCosine(%q) = %.7f, want >= %v", r.Text, c, tc.minCos)
				}
			}
			t.Logf("parity over %d texts: min cosine %.8f, mean %.8f, max |diff| %.3g",
				len(refs), minCos, sumCos/float64(len(refs)), maxDiff)
		})
	}
	// The bf16 vectors against the fp32 ones: above 0.9995 the embedded
	// index's recall on real vectors is unaffected.
	if a, b := vectors["fp32"], vectors["bf16"]; a != nil && b != nil {
		minCos := 1.0
		for i := range a {
			minCos = min(minCos, builtinCosine(a[i], b[i]))
		}
		t.Logf("bf16 against fp32: min cosine %.8f", minCos)
		if minCos < 0.9995 {
			t.Errorf("bf16 against fp32: min cosine %.7f, want >= 0.9995", minCos)
		}
	}
}

func TestBuiltinDeterministicAndBatchEqualsSingle(t *testing.T) {
	b := testBuiltin(t)
	texts := []string{"hello", "Why is the sky blue?", "   ", "emoji 😀🚀 are fun"}
	batch, err := b.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		one, err := b.Embed(t.Context(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(one[0], batch[i]) {
			t.Errorf("Embed([%q]) differs from the batch result", text)
		}
		if !slices.Equal(again[i], batch[i]) {
			t.Errorf("Embed(%q) is not deterministic", text)
		}
		var norm float64
		for _, v := range batch[i] {
			norm += float64(v) * float64(v)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("|Embed(%q)|² = %v, want 1", text, norm)
		}
	}
}

// TestBuiltinTruncatedMatchesTokenizer checks Truncated's short-ASCII answer
// (no tokenizing) against the tokenizer's count, at the 128-token bound and
// with the texts that yield the most tokens per byte: one character per
// token, spaces and punctuation between them.
func TestBuiltinTruncatedMatchesTokenizer(t *testing.T) {
	b := testBuiltin(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = " !#$%&()*+,-./:;<=>?@[]^_{|}~0123456789aZ"
	maxSeen := 0
	for n := 100; n <= 200; n++ {
		for range 20 {
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = alphabet[rng.IntN(len(alphabet))]
			}
			text := string(buf)
			tokens := len(b.Tokenize(text))
			maxSeen = max(maxSeen, tokens)
			if got, want := b.Truncated(text), tokens > 128; got != want {
				t.Fatalf("Truncated(%q) = %v, but it has %d tokens", text, got, tokens)
			}
		}
	}
	if maxSeen <= 128 {
		t.Fatalf("no text had more than 128 tokens (max %d): the bound is not exercised", maxSeen)
	}
}

func TestBuiltinTruncation(t *testing.T) {
	b := testBuiltin(t)
	short := "The quick brown fox jumps over the lazy dog."
	long := strings.Repeat("word ", 200)
	if b.Truncated(short) {
		t.Errorf("Truncated(short) = true")
	}
	if !b.Truncated(long) {
		t.Errorf("Truncated(long) = false")
	}
	ids := b.Tokenize(long)
	if len(ids) <= 128 {
		t.Fatalf("long text has %d tokens, want > 128", len(ids))
	}
	// Only the first 128 tokens count: changing the tail changes nothing.
	vs, err := b.Embed(t.Context(), []string{long, long + " a different ending"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vs[0], vs[1]) {
		t.Errorf("texts sharing their first 128 tokens got different vectors")
	}
}

func TestBuiltinInvalidText(t *testing.T) {
	b := testBuiltin(t)
	for _, tc := range []struct {
		name string
		text string
	}{
		{"empty", ""},
		{"invalid UTF-8", "caf\xe9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Embed(t.Context(), []string{"fine", tc.text})
			if !errors.Is(err, ErrInvalidText) {
				t.Fatalf("Embed(%q) error = %v, want ErrInvalidText", tc.text, err)
			}
		})
	}
	// Whitespace-only text has tokens (word-boundary pieces) and a vector.
	for _, text := range []string{" ", "\t\n"} {
		if ids := b.Tokenize(text); len(ids) == 0 {
			t.Errorf("Tokenize(%q) is empty", text)
		}
		if _, err := b.Embed(t.Context(), []string{text}); err != nil {
			t.Errorf("Embed(%q): %v", text, err)
		}
	}
	if got := b.Tokenize(""); len(got) != 0 {
		t.Errorf("Tokenize(\"\") = %v, want none", got)
	}
}

func TestBuiltinContextCancelled(t *testing.T) {
	b := testBuiltin(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Embed(ctx, []string{"hello"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed with cancelled ctx: %v, want context.Canceled", err)
	}
	if got, err := b.Embed(t.Context(), nil); err != nil || len(got) != 0 {
		t.Fatalf("Embed(nil) = %v, %v", got, err)
	}
}

func TestBuiltinParaphrase(t *testing.T) {
	b := testBuiltin(t)
	vs, err := b.Embed(t.Context(), []string{
		"How do I reset my password?",
		"How can I reset my password?",
		"What is the capital of France?",
	})
	if err != nil {
		t.Fatal(err)
	}
	para, unrelated := builtinCosine(vs[0], vs[1]), builtinCosine(vs[0], vs[2])
	t.Logf("paraphrase cosine %.4f, unrelated %.4f", para, unrelated)
	// Measured 0.9881 (float32 and half-float weights agree to 1e-6); the
	// bound leaves room for kernel changes, not for a broken model.
	if para < 0.95 {
		t.Errorf("paraphrase cosine = %.4f, want >= 0.95", para)
	}
	if unrelated > para-0.2 {
		t.Errorf("unrelated cosine = %.4f, too close to paraphrase %.4f", unrelated, para)
	}
	t.Logf("model resident bytes: %d", b.ModelBytes())
	if b.Name() != BuiltinName || b.Dimension() != 512 || b.ModelBytes() <= 0 {
		t.Errorf("Name, Dimension, ModelBytes = %q, %d, %d", b.Name(), b.Dimension(), b.ModelBytes())
	}
}

func TestBuiltinHalfFloat(t *testing.T) {
	for _, tc := range []struct {
		h    uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 0x1p-24},
		{0x0200, 0x1p-15}, {0x3555, 0.33325195}, {0x8000, float32(math.Copysign(0, -1))},
		{0x7c00, float32(math.Inf(1))},
	} {
		if got := f16ToF32(tc.h); got != tc.want || math.Signbit(float64(got)) != math.Signbit(float64(tc.want)) {
			t.Errorf("f16ToF32(%#04x) = %v, want %v", tc.h, got, tc.want)
		}
	}
	if got := f16ToF32(0x7e00); !math.IsNaN(float64(got)) {
		t.Errorf("f16ToF32(NaN) = %v", got)
	}
}

// TestBuiltinLinearKernels checks every matrix kernel this machine can run
// (half-float and float32 panels, portable) against float64 arithmetic, for
// row counts that cover full and partial tiles.
func TestBuiltinLinearKernels(t *testing.T) {
	// 48 columns: AVX2 panels only; 64: AVX-512 pairs of panels too.
	for _, out := range []int{48, 64} {
		testLinearKernels(t, 40, out)
	}
}

func testLinearKernels(t *testing.T, in, out int) {
	w := make([]float32, in*out)
	wh := make([]uint16, in*out)
	bias := make([]float32, out)
	for i := range w {
		// Exactly representable in half precision, so all kernels see the same W.
		wh[i] = uint16(0x3000 + (i*7919)%0x0fff)
		if i%3 == 0 {
			wh[i] |= 0x8000
		}
		w[i] = f16ToF32(wh[i])
	}
	for j := range bias {
		bias[j] = float32(j%5) - 2
	}
	kernels := map[string]*linear{
		"from-float32": newLinear(w, nil, bias, in, out),
		"from-half":    newLinear(nil, wh, bias, in, out),
		"portable":     {in: in, out: out, wt: transpose(w, in, out), b: bias},
	}
	for name, l := range kernels {
		for n := 1; n <= 21; n++ {
			x := make([]float32, (n+tileRows-1)*in)
			res := make([]float32, n*out)
			for i := range x[:n*in] {
				x[i] = float32((i*31)%17-8) / 8
			}
			for i := range res {
				res[i] = float32(i%7) - 3
			}
			for _, relu := range []bool{false, true} {
				got := make([]float32, n*out)
				l.apply(got, x[:n*in], n, res, relu, nil)
				for r := range n {
					for j := range out {
						want := float64(bias[j]) + float64(res[r*out+j])
						for k := range in {
							want += float64(x[r*in+k]) * float64(w[k*out+j])
						}
						if relu {
							want = max(want, 0)
						}
						if d := math.Abs(float64(got[r*out+j]) - want); d > 1e-4 {
							t.Fatalf("%s n=%d relu=%v [%d,%d] = %v, want %v", name, n, relu, r, j, got[r*out+j], want)
						}
					}
				}
			}
		}
	}
}

func transpose(w []float32, in, out int) []float32 {
	wt := make([]float32, in*out)
	for k := range in {
		for j := range out {
			wt[j*in+k] = w[k*out+j]
		}
	}
	return wt
}

// TestBuiltinContract runs the shared Embedder contract suite against the
// built-in encoder, alone and behind the embedding cache.
func TestBuiltinContract(t *testing.T) {
	t.Run("builtin", func(t *testing.T) {
		runEmbedderContract(t, func(t *testing.T) Embedder { return testBuiltin(t) })
	})
	t.Run("cached", func(t *testing.T) {
		runEmbedderContract(t, func(t *testing.T) Embedder {
			c, err := NewCached(testBuiltin(t), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			return c
		})
	})
}

// TestBuiltinPortableSkipsBF16 checks embed.portable_vectors' encoder: on a
// CPU with AVX512_BF16 it does not take the bf16 kernel (its vectors differ
// from NewBuiltin's), and it gives the bits of the fp32/half-float path that
// every AVX2 CPU runs.
func TestBuiltinPortableSkipsBF16(t *testing.T) {
	if !haveBF16 {
		t.Skip("this CPU has no AVX512_BF16, so NewBuiltin and NewBuiltinPortable run the same kernels (no variable enables it: it runs wherever the CPU has the feature)")
	}
	texts := []string{"How do I reset my password?", "What is the capital of France?"}
	embedWith := func(newB func() (*Builtin, error)) [][]float32 {
		t.Helper()
		b, err := newB()
		if err != nil {
			t.Fatal(err)
		}
		v, err := b.Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	portable := embedWith(NewBuiltinPortable)
	fast := embedWith(NewBuiltin)
	fp32 := embedWith(func() (*Builtin, error) { return newBuiltin(useLiteEN, false) })
	for i := range texts {
		if slices.Equal(portable[i], fast[i]) {
			t.Errorf("text %d: the portable encoder gave the bf16 kernel's vector", i)
		}
		if !slices.Equal(portable[i], fp32[i]) {
			t.Errorf("text %d: the portable encoder's vector is not the fp32 path's", i)
		}
	}
}
