package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/breakwater-dev/breakwater/lib/retry"
	"github.com/breakwater-dev/breakwater/lib/setting"
)

// Defaults applied by NewOpenAI to zero-valued OpenAIOptions fields.
const (
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultOpenAIModel      = "text-embedding-3-small"
	DefaultOpenAITimeout    = 10 * time.Second
	DefaultOpenAIBatchSize  = 256
	DefaultOpenAIMaxRetries = 3
	// DefaultOpenAIBaseDelay is half the caller's retry.DefaultBaseDelay: an
	// embedding sits in front of every semantic lookup, so its first retry
	// comes sooner.
	DefaultOpenAIBaseDelay = 100 * time.Millisecond
	DefaultOpenAIMaxDelay  = retry.DefaultMaxDelay
)

// openAIProbeText is what Probe embeds; any short valid text does.
const openAIProbeText = "breakwater dimension probe"

// Validate reports every problem of the fields of o that [embed.openai]
// sets, each naming its key (lib/setting); zero is the default.
func (o OpenAIOptions) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "embed.openai.dimensions", o.Dimensions, "must be >= 0 (0: the model's native size)")
	setting.Negative(&es, "embed.openai.timeout", o.Timeout, "must be > 0")
	return es.Err()
}

// OpenAIOptions configures an embedder for an OpenAI-compatible
// /v1/embeddings endpoint (OpenAI, Ollama, vLLM, TEI, ...). BaseURL, Model,
// Dimensions and Timeout are also the configuration file's [embed.openai]
// keys (the toml tags; zero:"refused": the file's 0 reaches Validate as a
// negative value, which it refuses).
type OpenAIOptions struct {
	// BaseURL is the API root including the version prefix, that
	// "/embeddings" is appended to, e.g. "https://api.openai.com/v1" or
	// "http://localhost:11434/v1" (Ollama). Empty: DefaultOpenAIBaseURL
	// here; the configuration file requires it when the provider is
	// "openai".
	BaseURL string `toml:"base_url"`
	// Model is the embedding model sent with every request, e.g.
	// "text-embedding-3-small". Empty: DefaultOpenAIModel here; the
	// configuration file requires it when the provider is "openai".
	Model string `toml:"model"`
	// APIKey is sent as "Authorization: Bearer <APIKey>". If empty, no
	// Authorization header is sent, which is what local servers expect.
	APIKey string
	// Dimensions asks the model for shorter vectors of this length (the
	// request's "dimensions" field; text-embedding-3 and later). Every
	// returned vector must then have this length. 0 (default): the field is
	// not sent and the model's native length is learnt from one call (see
	// Probe; retried in the background while the endpoint is down).
	Dimensions int `toml:"dimensions"`
	// Timeout bounds each embeddings call (one attempt, not the retries
	// together; ctx bounds those). Default 10s (DefaultOpenAITimeout).
	Timeout time.Duration `toml:"timeout" zero:"refused"`
	// BatchSize is the most texts sent in one request; longer inputs are sent
	// as consecutive requests. If 0, DefaultOpenAIBatchSize is used (OpenAI
	// accepts up to 2048).
	BatchSize int
	// MaxRetries is how many times a failed request is retried (429, 5xx,
	// connection errors, request timeouts). If 0, DefaultOpenAIMaxRetries is
	// used; if negative, requests are not retried.
	MaxRetries int
	// BaseDelay is the backoff cap before the first retry; it doubles on each
	// retry up to MaxDelay, and the wait is drawn uniformly below the cap
	// (full jitter). If 0, DefaultOpenAIBaseDelay is used.
	BaseDelay time.Duration
	// MaxDelay caps the backoff and is the longest Retry-After honoured: a
	// server asking for a longer wait ends the retries at once. If 0,
	// DefaultOpenAIMaxDelay is used.
	MaxDelay time.Duration
	// HTTPClient sends the requests. If nil, a client on
	// http.DefaultTransport is used. Its own Timeout, if any, applies on top
	// of Timeout.
	HTTPClient *http.Client
}

// OpenAI embeds texts through an OpenAI-compatible /v1/embeddings endpoint.
// It is safe for concurrent use.
//
// NewOpenAI does no network I/O, so when Dimensions is not set the vector
// length is unknown until the first successful response: call Probe (with a
// timeout) at start-up before sizing an index. The returned vectors are
// L2-normalised here, because some servers (Ollama) do not normalise.
type OpenAI struct {
	client     *openai.Client
	model      string
	dims       int // requested dimensions; 0: not sent
	name       string
	timeout    time.Duration
	batchSize  int
	maxRetries int
	baseDelay  time.Duration
	maxDelay   time.Duration

	dim atomic.Int64 // vector length: dims, or learnt from the first response
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI returns an embedder for opts, with defaults for zero fields. It
// checks the options but does not contact the server.
func NewOpenAI(opts OpenAIOptions) (*OpenAI, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("new openai embedder: %w", err)
	}
	switch {
	case opts.BatchSize < 0:
		return nil, fmt.Errorf("new openai embedder: batch size %d is negative", opts.BatchSize)
	case opts.BaseDelay < 0:
		return nil, fmt.Errorf("new openai embedder: base delay %s is negative", opts.BaseDelay)
	case opts.MaxDelay < 0:
		return nil, fmt.Errorf("new openai embedder: max delay %s is negative", opts.MaxDelay)
	}
	base := orDefaultValue(opts.BaseURL, DefaultOpenAIBaseURL)
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("new openai embedder: parse base url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("new openai embedder: base url %q is not an http(s) URL", base)
	}
	o := &OpenAI{
		model:      orDefaultValue(opts.Model, DefaultOpenAIModel),
		dims:       opts.Dimensions,
		timeout:    orDefaultValue(opts.Timeout, DefaultOpenAITimeout),
		batchSize:  orDefaultValue(opts.BatchSize, DefaultOpenAIBatchSize),
		maxRetries: orDefaultValue(opts.MaxRetries, DefaultOpenAIMaxRetries),
		baseDelay:  orDefaultValue(opts.BaseDelay, DefaultOpenAIBaseDelay),
		maxDelay:   orDefaultValue(opts.MaxDelay, DefaultOpenAIMaxDelay),
	}
	if o.maxRetries < 0 {
		o.maxRetries = 0
	}
	if o.baseDelay > o.maxDelay {
		return nil, fmt.Errorf("new openai embedder: base delay %s exceeds max delay %s", o.baseDelay, o.maxDelay)
	}
	o.name = "openai:" + o.model
	if o.dims > 0 {
		o.name += ":" + strconv.Itoa(o.dims)
		o.dim.Store(int64(o.dims))
	}
	cfg := openai.DefaultConfig(opts.APIKey)
	cfg.BaseURL = strings.TrimRight(base, "/")
	if opts.HTTPClient != nil {
		cfg.HTTPClient = opts.HTTPClient
	}
	o.client = openai.NewClientWithConfig(cfg)
	return o, nil
}

// orDefaultValue returns v, or def when v is the zero value.
func orDefaultValue[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Name is "openai:<model>", with ":<dimensions>" appended when Dimensions
// is set.
func (o *OpenAI) Name() string { return o.name }

// OpenAICoverBytes is the longest text (*OpenAI).Covers accepts. A remote
// model's tokenizer is unknown here, but every tokenizer in use emits at most
// one token per byte (byte-level BPE, OpenAI's cl100k/o200k) or per
// character (WordPiece, SentencePiece), plus a few markers: 512 bytes fit the
// 512-token window of the BERT-family models that OpenAI-compatible servers
// serve (e5, bge, gte) and OpenAI's 8,191 with room to spare.
const OpenAICoverBytes = 512

// Covers reports whether text is at most OpenAICoverBytes long, the rule for
// a remote model whose tokens Breakwater cannot see: a longer text may be
// truncated by the server without saying so. Unknown tokens are not
// detected (byte-level BPE has none; a WordPiece model maps unseen
// characters to [UNK]); words of other scripts are left to the guard, which
// asks them for a verbatim counterpart.
func (o *OpenAI) Covers(text string) bool { return len(text) <= OpenAICoverBytes }

// Dimension is OpenAIOptions.Dimensions when set, else the length learnt by
// Probe or the first successful Embed; 0 before that.
func (o *OpenAI) Dimension() int { return int(o.dim.Load()) }

// Probe embeds one short text to check that the endpoint answers and, when
// Dimensions is not set, to learn the vector length. It returns Dimension().
// Retries follow the options, within ctx.
func (o *OpenAI) Probe(ctx context.Context) (int, error) {
	vecs, err := o.Embed(ctx, []string{openAIProbeText})
	if err != nil {
		return 0, fmt.Errorf("probe embeddings endpoint: %w", err)
	}
	return len(vecs[0]), nil
}

// Embed returns one L2-normalised vector per text, in order. Texts are sent
// BatchSize at a time, one request after another. The empty string is
// rejected with ErrInvalidText before any request, because the OpenAI API
// answers 400 to it; so is invalid UTF-8.
func (o *OpenAI) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	if err := checkOpenAITexts(texts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("embed texts: %w", err)
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += o.batchSize {
		end := min(start+o.batchSize, len(texts))
		vecs, err := o.embedBatch(ctx, texts[start:end])
		if err != nil {
			return nil, fmt.Errorf("embed texts %d to %d: %w", start, end-1, err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// checkOpenAITexts rejects what the API would reject, so that a bad text costs no
// request and is reported as ErrInvalidText rather than as an HTTP 400.
func checkOpenAITexts(texts []string) error {
	for i, t := range texts {
		switch {
		case t == "":
			return fmt.Errorf("check text %d: %w: empty (the embeddings API rejects \"\")", i, ErrInvalidText)
		case !utf8.ValidString(t):
			return fmt.Errorf("check text %d: %w: not valid UTF-8", i, ErrInvalidText)
		}
	}
	return nil
}

// embedBatch sends one batch, retrying what is worth retrying within ctx.
func (o *OpenAI) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	for attempt := 1; ; attempt++ {
		vecs, hdr, err := o.request(ctx, texts)
		if err == nil {
			return vecs, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(err, ctxErr) {
				return nil, fmt.Errorf("request embeddings: %w", err)
			}
			return nil, fmt.Errorf("request embeddings: %w (last error: %w)", ctxErr, err)
		}
		if attempt > o.maxRetries || !retryableOpenAIError(err) {
			return nil, fmt.Errorf("request embeddings (attempt %d): %w", attempt, err)
		}
		// The shared rules (lib/retry): a server's wait is honoured in
		// full, even above MaxDelay, when the deadline leaves room for it.
		wait, hinted := retry.Delay(attempt, o.baseDelay, o.maxDelay, hdr, time.Now())
		deadline, hasDeadline := ctx.Deadline()
		if !retry.Allowed(wait, hinted, o.maxDelay, time.Until(deadline), hasDeadline) {
			what := "retry in"
			if hinted {
				what = "retry-after"
			}
			if hasDeadline {
				return nil, fmt.Errorf("request embeddings (attempt %d): %s %s would pass the deadline: %w", attempt, what, wait, err)
			}
			return nil, fmt.Errorf("request embeddings (attempt %d): retry-after %s exceeds max delay %s and no deadline bounds it: %w",
				attempt, wait, o.maxDelay, err)
		}
		if sleepErr := retry.Sleep(ctx, wait); sleepErr != nil {
			return nil, fmt.Errorf("request embeddings: %w (last error: %w)", sleepErr, err)
		}
	}
}

// request makes one attempt under the per-request timeout. On failure it
// also returns the response headers (nil without a response), which may ask
// for a wait.
func (o *OpenAI) request(ctx context.Context, texts []string) ([][]float32, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	resp, err := o.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{
		Input:      texts,
		Model:      openai.EmbeddingModel(o.model),
		Dimensions: o.dims,
	})
	if err != nil {
		// go-openai sets the response headers before it checks the status,
		// so Retry-After is readable on an error response.
		return nil, resp.Header(), err
	}
	vecs, err := o.decode(resp.Data, len(texts))
	return vecs, nil, err
}

// decode checks a response against the request and returns its vectors in
// input order, normalised. Any inconsistency is an error: a wrong or missing
// vector must never reach the index.
func (o *OpenAI) decode(data []openai.Embedding, n int) ([][]float32, error) {
	if len(data) == 0 {
		return nil, errors.New("decode embeddings: response has no data")
	}
	if len(data) != n {
		return nil, fmt.Errorf("decode embeddings: got %d vectors for %d texts", len(data), n)
	}
	want := int(o.dim.Load())
	out := make([][]float32, n)
	for _, d := range data {
		switch {
		case d.Index < 0 || d.Index >= n:
			return nil, fmt.Errorf("decode embeddings: index %d out of range for %d texts", d.Index, n)
		case out[d.Index] != nil:
			// A missing "index" decodes as 0, so it shows up here.
			return nil, fmt.Errorf("decode embeddings: index %d repeated (an index is missing)", d.Index)
		}
		if want == 0 {
			want = len(d.Embedding)
		}
		if len(d.Embedding) != want {
			return nil, fmt.Errorf("decode embeddings: vector %d has dimension %d, want %d", d.Index, len(d.Embedding), want)
		}
		if err := normalizeResponseVector(d.Embedding); err != nil {
			return nil, fmt.Errorf("decode embeddings: vector %d: %w", d.Index, err)
		}
		out[d.Index] = d.Embedding
	}
	if !o.dim.CompareAndSwap(0, int64(want)) {
		if got := o.dim.Load(); got != int64(want) {
			return nil, fmt.Errorf("decode embeddings: dimension %d, want %d", want, got)
		}
	}
	return out, nil
}

// normalizeResponseVector scales v to unit L2 norm in place. A zero or non-finite vector is
// an error: it has no direction to compare.
func normalizeResponseVector(v []float32) error {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	switch {
	case len(v) == 0:
		return errors.New("normalize vector: empty")
	case math.IsNaN(sum) || math.IsInf(sum, 0):
		return errors.New("normalize vector: not finite")
	case sum == 0:
		return errors.New("normalize vector: zero vector")
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return nil
}

// retryableOpenAIError reports whether a failed request may succeed if sent
// again, by the rules the upstream caller uses too (lib/retry): the
// retried statuses, timeouts and network failures. Other 4xx and malformed
// responses (a decoding error is no network failure) are not retried.
func retryableOpenAIError(err error) bool {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		ok, _ := retry.Status(nil, apiErr.HTTPStatusCode)
		return ok
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		ok, _ := retry.Status(nil, reqErr.HTTPStatusCode)
		return ok
	}
	ok, reason := retry.Error(err)
	return ok && (reason != "conn_error" || retry.IsNetwork(err))
}
