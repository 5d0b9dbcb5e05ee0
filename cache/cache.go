// Package cache keeps LLM answers: request keys, tenant partitions, the exact tier and the semantic tier behind the Index contract.
package cache

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Tiers reported in Result.Tier.
const (
	TierExact    = "exact"
	TierSemantic = "semantic"
)

// Component names reported by Health.
const (
	ComponentEmbedder = "embedder"
	ComponentIndex    = "index"
	// ComponentIndexWrites is the index's write path, tracked apart from its
	// reads: with a full disk every search (and the Len that Recheck calls)
	// succeeds while every upsert fails, and a read success must not clear a
	// write failure. Only a successful upsert clears it.
	ComponentIndexWrites = "index_writes"
)

// Defaults for zero Options fields. DefaultThreshold is the cosine
// similarity a semantic hit needs (chosen on the dev set with the guard on:
// docs/PRECISION.md); the queue bounds the index write-back in entries and
// in bytes.
const (
	DefaultThreshold  = 0.92
	DefaultQueueSize  = 1024
	DefaultQueueBytes = 64 << 20
)

// Cross-user scopes (Options.CrossUser): whether the semantic tier serves
// an entry one end user created to another end user of the same partition.
// Exact hits are never scoped: the identical request gets the model's
// answer to that very request.
const (
	// CrossUserAgreed serves another end user's entry only once it was
	// agreed independently (Entry.Agreed) or the judge verified the pair.
	CrossUserAgreed = "agreed"
	// CrossUserAny serves every entry of the partition to every end user.
	CrossUserAny = "any"
	// CrossUserNever serves an end user only the entries they created.
	CrossUserNever = "never"
	// DefaultCrossUser is agreed: one end user cannot plant an answer that
	// others are served, at a small cost in hits (docs/SECURITY.md).
	DefaultCrossUser = CrossUserAgreed
)

// ValidCrossUser reports whether s is a cross-user scope ("" is the default).
func ValidCrossUser(s string) bool {
	return s == "" || s == CrossUserAgreed || s == CrossUserAny || s == CrossUserNever
}

// searchLimit is how many candidates a semantic lookup considers: when the
// best one is rejected (guard, long text, max-age), the next may still serve.
const searchLimit = 4

// Embedder turns texts into L2-normalised vectors; embed.Embedder satisfies
// it. An embedder that also has Covers(text string) bool (embed.Coverer), or
// only Truncated(text string) bool (embed.Truncator), tells the cache which
// texts it cannot represent in full: those get exact hits only.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dimension() int
	Name() string
}

// truncator is embed.Truncator, declared here so cache does not import embed.
type truncator interface {
	Truncated(text string) bool
}

// coverer is embed.Coverer.
type coverer interface {
	Covers(text string) bool
}

// Verifier puts semantic candidates to a judge (cache/verify implements it).
type Verifier interface {
	// Floor is the lowest similarity a candidate needs to be considered.
	Floor() float32
	// Limit is how many guarded candidates one lookup may put to the judge.
	Limit() int
	// Verify returns one verdict per candidate (true: serve it), or ok =
	// false when there is no verdict and the static threshold decides.
	Verify(ctx context.Context, partition, query string, cands []Entry) (verdicts []bool, ok bool)
}

// Options configure a Cache. Every zero value is usable. Threshold, TTL,
// QueueSize and QueueBytes are also the configuration file's [cache] keys
// (the toml tags; the zero tag is what the file's 0 means: "refused", a
// negative value Validate refuses, or the text of "none", the option's
// negative value, where a negative value written is refused).
type Options struct {
	// Exact is the exact tier. If nil, New creates one of
	// DefaultExactMaxBytes, which Close then closes; an Exact passed in is
	// left open for its owner to close.
	Exact *Exact
	// Index is the semantic tier's vector store. If nil (or Embedder is nil)
	// there is no semantic tier: lookups use the exact tier only.
	Index Index
	// OpenIndex, used when Index is nil, opens the index in the background
	// (a large embedded store takes seconds to load): until it returns the
	// semantic tier is off, Health reports ComponentIndex as ErrIndexOpening,
	// and answers go to the exact tier only. An error leaves the tier off
	// with the cause in Health. The index it returns is closed by Close.
	OpenIndex func(ctx context.Context) (Index, error)
	// Embedder embeds query texts for Index. If nil there is no semantic tier.
	Embedder Embedder
	// Threshold is the minimum cosine similarity for a semantic hit, in
	// (0, 1]. Default 0.92 (DefaultThreshold, chosen on the dev set with the
	// guard on: docs/PRECISION.md). A request's X-Breakwater-Threshold may
	// raise it, never lower it.
	Threshold float32 `toml:"threshold" zero:"refused"`
	// TTL is how long an entry is served, counted from Entry.Created, when
	// Store is given an entry without Expires. Default 24h in the
	// configuration (proxy.DefaultTTL, which the proxy sets on every entry);
	// the option's zero: such entries never expire (they are still bounded
	// by the tiers' sizes).
	TTL time.Duration `toml:"ttl" zero:"refused"`
	// QueueSize is the capacity of the asynchronous vector-index write
	// queue (writes waiting to be embedded and upserted); a full queue
	// drops (and counts) writes, never blocks a response. Default 1024
	// (DefaultQueueSize). Must be >= 1.
	QueueSize int `toml:"write_queue" zero:"refused"`
	// QueueBytes bounds the bytes (prompts and answers) waiting in that
	// queue, dropped and counted beyond it like a full queue: a long prompt
	// can be a few MiB. Default 64 MiB (DefaultQueueBytes). 0 in the file
	// (a negative value here): no limit.
	QueueBytes int64 `toml:"write_queue_bytes" unit:"bytes" zero:"0: no limit"`
	// Logger receives degraded-tier warnings; it never sees prompt text or
	// headers. Nil discards.
	Logger *slog.Logger
	// Now is the clock for ages and expiry. Nil means time.Now.
	Now func() time.Time
	// Guard vets a semantic candidate above the threshold: it is called with
	// the new query and the candidate entry's query and rejects the candidate
	// (with a short reason, counted in Stats) when answer-determining tokens
	// differ. Nil accepts every candidate.
	Guard func(query, candidate string) (ok bool, reason string)
	// JudgedGuard, when set with a Verifier, vets the candidates put to the
	// Verifier instead of Guard (a judge reads the wording, so this guard
	// may be looser); a candidate served without a verdict must still pass
	// Guard. Nil: Guard.
	JudgedGuard func(query, candidate string) (ok bool, reason string)
	// Verifier, when set, is asked about the guarded candidates from its
	// Floor upward, best first, and the first it accepts is served; without
	// a verdict the static Threshold decides. Nil: the static threshold.
	Verifier Verifier
	// CrossUser is the scope of semantic hits between end users of one
	// partition (Key.EndUser): CrossUserAgreed, CrossUserAny or
	// CrossUserNever. "" means DefaultCrossUser.
	CrossUser string
	// UserSecret keys the hash of end-user identities (EndUserHash). Nil:
	// a random key per process, so entries written before a restart count
	// as another user's (a persistent or shared index wants the partition
	// secret here).
	UserSecret []byte
}

// LookupOptions are the per-request cache controls.
type LookupOptions struct {
	// Threshold raises the configured similarity threshold for this lookup
	// (X-Breakwater-Threshold); the effective value is the larger of the two.
	// Zero keeps the configured threshold.
	Threshold float32
	// StaleThreshold, when > 0, replaces the threshold for this lookup even
	// when it is lower. Only the proxy's degraded mode uses it (no upstream
	// can answer: a near match is better than an error, and the response
	// says "stale"); client headers can never lower the threshold.
	StaleThreshold float32
	// MaxAge serves only entries younger than this (Cache-Control: max-age),
	// from either tier. Zero accepts any age.
	MaxAge time.Duration
	// SkipSemantic looks in the exact tier only.
	SkipSemantic bool
}

// Result is a cache hit.
type Result struct {
	// Entry is the entry served. For a semantic hit it is the matched entry as
	// stored, so Entry.Key and Entry.Query are those of the earlier request.
	Entry Entry
	// Tier is TierExact or TierSemantic.
	Tier string
	// Similarity is the cosine similarity of a semantic hit; 1 for exact hits.
	Similarity float32
	// Age is how long ago the upstream produced the answer.
	Age time.Duration
	// Near is set on a miss when a guarded candidate at or above the
	// Verifier's Floor was not served (judged wrong, or below the static
	// threshold): the best such candidate.
	Near *Match
	// Verified is set on a semantic hit the Verifier judged the same
	// question: the only kind Promote copies into the exact tier.
	Verified bool
	// Foreign is set on a miss under CrossUserAgreed when the best
	// candidate that would have been served was refused only because
	// another end user created it: the caller compares the fresh answer
	// with it, and stores that answer with Entry.Agreed when they agree.
	Foreign *Match
	// Miss is the handle for writing the fresh answer back when the
	// result is not served (a miss, or a hit the caller answers fresh
	// instead): its Store carries what the lookup learnt, the query's
	// embedding, so the write-back does not embed the question again.
	Miss Miss

	// gen is the flush generation the lookup started at: Promote drops a
	// promotion whose partition was flushed since. query is the folded
	// query (SemanticText) a promotion stores.
	gen   uint64
	query string
}

// Stats are the cache's counters.
type Stats struct {
	ExactEntries int `json:"exact_entries"`
	// IndexEntries is -1 when there is no index or it cannot be counted.
	IndexEntries int `json:"index_entries"`
	QueueDepth   int `json:"queue_depth"`
	// QueueDrops counts index writes dropped because the queue was full or
	// the cache was closing.
	QueueDrops uint64 `json:"queue_drops"`
	Counters
}

// Counters are the cache's event counters and the index's state, the part
// of Stats the proxy's /stats shows as they are.
type Counters struct {
	// WriteFailures counts index writes lost to embedder or index errors.
	WriteFailures uint64 `json:"write_failures"`
	EmbedErrors   uint64 `json:"embed_errors"`
	// IndexErrors counts failed index reads and flushes.
	IndexErrors uint64 `json:"index_errors"`
	// IndexWriteErrors counts failed index upserts (batches), the failures
	// that make ComponentIndexWrites degraded.
	IndexWriteErrors uint64 `json:"index_write_errors"`
	// GuardRejections counts semantic candidates rejected by Guard, by reason.
	GuardRejections map[string]uint64 `json:"guard_rejections"`
	// LongTextRejections counts candidates rejected because the embedder
	// cannot see all of the candidate's text (unknown tokens, truncation)
	// or one text is much longer than the other (see Comparable).
	LongTextRejections uint64 `json:"long_text_rejections"`
	// ExactOnly counts lookups whose query the semantic tier cannot see in
	// full (SemanticText not ok, unknown tokens, truncation): they were
	// answered from the exact tier only, and their answers are not indexed.
	ExactOnly uint64 `json:"exact_only"`
	// Promotions counts verified semantic hits copied into the exact tier.
	Promotions uint64 `json:"promotions"`
	// CrossUserRefusals counts semantic candidates not served because
	// another end user created them (Options.CrossUser).
	CrossUserRefusals uint64 `json:"cross_user_refusals"`
	// Agreements counts answers stored as agreed (Entry.Agreed).
	Agreements uint64 `json:"agreements"`
	// IndexState is IndexOff, IndexOpening, IndexReady or IndexFailed.
	IndexState string `json:"index_state"`
	// IndexOpenSeconds is how long Options.OpenIndex took (so far, while
	// opening); 0 without it.
	IndexOpenSeconds float64 `json:"index_open_seconds,omitempty"`
	// OpeningSkips counts answers stored in the exact tier only because the
	// index was still opening.
	OpeningSkips uint64 `json:"opening_skips,omitempty"`
}

// Cache answers lookups from the exact tier, then the semantic tier, and
// writes answers back to both. It is safe for concurrent use.
type Cache struct {
	exact     *Exact
	ownExact  bool
	ixp       atomic.Pointer[indexRef] // nil: no semantic tier (yet)
	op        *opener                  // nil without Options.OpenIndex
	embedder  Embedder
	cover     func(text string) bool // nil: the embedder sees every text
	threshold float32
	ttl       time.Duration
	log       *slog.Logger
	now       func() time.Time
	guard     func(query, candidate string) (bool, string)
	verifier  Verifier
	jguard    func(query, candidate string) (bool, string)
	crossUser string
	userKey   []byte
	q         *queue

	// gen counts flushes. Writes remember the gen they started at; a write
	// whose partition was flushed since is dropped instead of resurrecting
	// flushed data (a queued index write, a promotion racing a flush).
	gen atomic.Uint64
	// flushMu guards marks and orders flushes against promotions.
	flushMu sync.RWMutex
	marks   flushMarks
	// writeMu orders index flushes against queued upserts.
	writeMu sync.Mutex

	healthMu sync.Mutex
	health   map[string]error

	embedErrors, indexErrors, writeFailures, longText, promotions atomic.Uint64
	exactOnly                                                     atomic.Uint64
	indexWriteErrors, openingSkips, crossUserRefusals, agreements atomic.Uint64
	guardMu                                                       sync.Mutex
	guardRejects                                                  map[string]uint64

	// retryMu guards retry, the last batch whose upsert failed (at most
	// maxBatch items): Recheck upserts it again to learn whether writes work
	// without waiting for new traffic.
	retryMu sync.Mutex
	retry   []retryItem

	closeOnce sync.Once
}

// New returns a Cache and starts its index-write worker; call Close to stop it.
func New(opts Options) *Cache {
	c := &Cache{
		exact:        opts.Exact,
		embedder:     opts.Embedder,
		threshold:    opts.Threshold,
		ttl:          opts.TTL,
		log:          opts.Logger,
		now:          opts.Now,
		guard:        opts.Guard,
		verifier:     opts.Verifier,
		jguard:       opts.JudgedGuard,
		crossUser:    opts.CrossUser,
		userKey:      opts.UserSecret,
		marks:        flushMarks{parts: map[string]uint64{}},
		health:       map[string]error{},
		guardRejects: map[string]uint64{},
	}
	if c.exact == nil {
		x, err := NewExact(DefaultExactMaxBytes)
		if err != nil {
			panic(err) // unreachable: the size is a positive constant
		}
		c.exact, c.ownExact = x, true
	}
	switch {
	case c.embedder == nil:
	case opts.Index != nil:
		c.ixp.Store(&indexRef{opts.Index})
		c.watchFlushes(opts.Index)
	case opts.OpenIndex != nil:
		defer c.startOpen(opts.OpenIndex) // once c is complete
	default:
		c.embedder = nil
	}
	c.cover = coverFunc(c.embedder)
	if c.threshold <= 0 {
		c.threshold = DefaultThreshold
	}
	if c.crossUser == "" {
		c.crossUser = DefaultCrossUser
	}
	if len(c.userKey) == 0 {
		c.userKey = make([]byte, 32)
		_, _ = rand.Read(c.userKey) // crypto/rand.Read never fails (Go 1.24)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	qbytes := opts.QueueBytes
	if qbytes == 0 {
		qbytes = DefaultQueueBytes
	}
	c.q = newQueue(size, qbytes, c.writeBatch)
	return c
}

// ix is the semantic tier's index, nil when there is none or it is still
// opening.
func (c *Cache) ix() Index {
	if r := c.ixp.Load(); r != nil {
		return r.Index
	}
	return nil
}

// Lookup returns the cached answer for key, if any: the exact tier first, then
// the semantic tier. A semantic hit is not written anywhere: once it has been
// served, the caller hands it to Promote, which copies a verified one into
// the exact tier. Embedder and index failures never fail a lookup: they are
// logged, counted and reported by Health, and the lookup is a miss.
func (c *Cache) Lookup(ctx context.Context, key Key, opt LookupOptions) (Result, bool) {
	now := c.now()
	fresh := func(e *Entry) bool {
		return opt.MaxAge <= 0 || now.Sub(e.Created) <= opt.MaxAge
	}
	if e, ok := c.exact.Get(key.Exact, now); ok && e.Partition == key.Partition && fresh(&e) {
		return Result{Entry: e, Tier: TierExact, Similarity: 1, Age: now.Sub(e.Created)}, true
	}
	index := c.ix()
	if index == nil || opt.SkipSemantic || !key.SemanticEligible() {
		return Result{}, false
	}
	startGen := c.gen.Load()

	// The index holds every entry under its exact key too: with a shared
	// index (Qdrant) that makes every replica's exact entries visible here,
	// and after a restart the embedded index answers repeats exactly.
	if opt.StaleThreshold == 0 {
		e, ok, err := index.Get(ctx, key.Exact)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.indexErrors.Add(1)
				c.fail(ComponentIndex, fmt.Errorf("get from index: %w", err))
			}
			return Result{}, false
		case ok && e.Partition == key.Partition && e.Fingerprint == key.Fingerprint && !e.Expired(now) && fresh(&e):
			c.ok(ComponentIndex)
			if c.gen.Load() == startGen {
				c.exact.Set(e)
			}
			return Result{Entry: e, Tier: TierExact, Similarity: 1, Age: now.Sub(e.Created)}, true
		}
	}

	// What the encoder cannot see cannot match: such a query is answered
	// from the exact tier only (issue 42).
	query, seen := c.seen(key.Query)
	if !seen {
		c.exactOnly.Add(1)
		return Result{}, false
	}
	vecs, err := c.embedder.Embed(ctx, []string{query})
	if err == nil && (len(vecs) != 1 || len(vecs[0]) != c.embedder.Dimension()) {
		err = fmt.Errorf("embedder returned %d vectors for 1 text (dimension %d)", len(vecs), c.embedder.Dimension())
	}
	if err != nil {
		if ctx.Err() == nil { // a client that went away is no embedder fault
			c.embedErrors.Add(1)
			c.fail(ComponentEmbedder, fmt.Errorf("embed query: %w", err))
		}
		return Result{}, false
	}
	c.ok(ComponentEmbedder)

	threshold := min(max(c.threshold, opt.Threshold), 1)
	if opt.StaleThreshold > 0 {
		threshold = min(opt.StaleThreshold, 1)
	}
	// With a verifier the search reaches down to its floor (a client's
	// X-Breakwater-Threshold still raises it); stale lookups stay static.
	floor, limit, verifying := threshold, searchLimit, c.verifier != nil && opt.StaleThreshold == 0
	if verifying {
		floor = min(threshold, max(c.verifier.Floor(), opt.Threshold))
		limit = max(limit, c.verifier.Limit())
	}
	matches, err := index.Search(ctx, SearchQuery{
		Partition:   key.Partition,
		Fingerprint: key.Fingerprint,
		Vector:      vecs[0],
		Threshold:   floor,
		Limit:       limit,
		Now:         now,
	})
	if err != nil {
		if ctx.Err() == nil {
			c.indexErrors.Add(1)
			c.fail(ComponentIndex, fmt.Errorf("search index: %w", err))
		}
		return Result{Miss: c.missOf(vecs[0])}, false
	}
	c.ok(ComponentIndex)

	want, vetGuard := 1, c.guard
	if verifying {
		want = c.verifier.Limit()
		if c.jguard != nil {
			vetGuard = c.jguard
		}
	}
	user := c.userOf(key)
	passed, foreign := c.vet(key, query, user, matches, floor, threshold, want, verifying, vetGuard, now, fresh)
	if len(passed) == 0 {
		return Result{Miss: c.missOf(vecs[0]), Foreign: foreign}, false
	}
	serve, verified := -1, false
	if verifying {
		cands := make([]Entry, len(passed))
		for i := range passed {
			cands[i] = passed[i].Entry
		}
		if verdicts, ok := c.verifier.Verify(ctx, key.Partition, query, cands); ok {
			serve = slices.Index(verdicts, true)
			verified = serve >= 0
		} else {
			// No verdict: the static threshold and the strict guard decide,
			// and another end user's entry needs a verdict (or agreement).
			serve = slices.IndexFunc(passed, func(m Match) bool {
				if m.Score < threshold || (c.jguard != nil && c.guard != nil && !c.guardOK(query, m.Entry.Query)) {
					return false
				}
				if c.foreign(user, &m.Entry) {
					c.crossUserRefusals.Add(1)
					if foreign == nil && c.crossUser == CrossUserAgreed {
						foreign = &m
					}
					return false
				}
				return true
			})
		}
	} else if passed[0].Score >= threshold {
		serve = 0
	}
	if serve < 0 {
		return Result{Near: &passed[0], Miss: c.missOf(vecs[0]), Foreign: foreign}, false
	}
	m := passed[serve]
	return Result{Entry: m.Entry, Tier: TierSemantic, Similarity: m.Score, Age: now.Sub(m.Entry.Created), Miss: c.missOf(vecs[0]),
		Verified: verified && opt.StaleThreshold == 0, gen: startGen, query: query}, true
}

// userOf is the keyed hash of key's end user ("" for none).
func (c *Cache) userOf(key Key) string {
	return EndUserHash(c.userKey, key.Partition, key.EndUser)
}

// foreign reports whether the scope keeps e from the end user whose hash is
// user without a judge's verdict: another user created it and, under
// CrossUserAgreed, it was not agreed.
func (c *Cache) foreign(user string, e *Entry) bool {
	switch {
	case e.User == user || c.crossUser == CrossUserAny:
		return false
	case c.crossUser == CrossUserAgreed:
		return !e.Agreed
	}
	return true
}

// vet keeps the candidates that may be served, in order: right partition
// and fingerprint, score at least floor, unexpired, fresh enough, not
// refused by the long-text rule or guard, within the end-user scope; at
// most want of them. query is key.Query folded (SemanticText); a
// candidate's Entry.Query is folded here too (entries written before
// folding existed hold the raw text). Another user's unagreed entry is kept
// for a judge (verifying under CrossUserAgreed), else refused; the best
// such refusal at or above threshold is returned as foreign.
func (c *Cache) vet(key Key, query, user string, matches []Match, floor, threshold float32, want int, verifying bool,
	guard func(q, c string) (bool, string), now time.Time, fresh func(*Entry) bool) (passed []Match, foreign *Match) {
	for _, m := range matches {
		if len(passed) >= want {
			break
		}
		e := m.Entry
		// The index filters on partition and fingerprint; checking again here
		// means a faulty backend can cost a hit but never leak across tenants.
		if e.Partition != key.Partition || e.Fingerprint != key.Fingerprint ||
			m.Score < floor || e.Expired(now) || !fresh(&e) {
			continue
		}
		// An entry the encoder cannot see in full (unknown tokens, a
		// truncated tail that two vectors may share), or much longer or
		// shorter than the query, is never matched by its vector.
		eq, seen := c.seen(e.Query)
		if !seen || !Comparable(query, eq) {
			c.longText.Add(1)
			continue
		}
		m.Entry.Query = eq
		if guard != nil {
			if ok, reason := guard(query, eq); !ok {
				c.guardMu.Lock()
				c.guardRejects[reason]++
				c.guardMu.Unlock()
				continue
			}
		}
		if c.foreign(user, &e) && (!verifying || c.crossUser == CrossUserNever) {
			c.crossUserRefusals.Add(1)
			if foreign == nil && c.crossUser == CrossUserAgreed && m.Score >= threshold {
				foreign = &m
			}
			continue
		}
		passed = append(passed, m)
	}
	return passed, foreign
}

// guardOK is the strict guard's verdict on a candidate vetted by a looser
// one; a rejection is counted like any other.
func (c *Cache) guardOK(query, candidate string) bool {
	ok, reason := c.guard(query, candidate)
	if !ok {
		c.guardMu.Lock()
		c.guardRejects[reason]++
		c.guardMu.Unlock()
	}
	return ok
}

// Promote copies a semantic hit that was served into the exact tier under
// the asker's key, so that the same request hits exactly next time: only a
// hit the Verifier judged the same question (Result.Verified). An unverified
// hit (the static threshold decided) is looked up again on every request,
// so one wrong match never becomes the exact answer for that wording; a hit
// the caller did not serve (sampled for the false-hit estimate) must not be
// passed here. Promotion keeps the original Created and Expires, so it never
// extends an answer's life.
func (c *Cache) Promote(key Key, res Result) {
	if res.Tier != TierSemantic || !res.Verified {
		return
	}
	c.promote(key, res.query, res.Entry, res.gen)
}

func (c *Cache) promote(key Key, query string, e Entry, startGen uint64) {
	e.Key = key.Exact
	e.Query = query
	c.flushMu.RLock()
	defer c.flushMu.RUnlock()
	if c.marks.flushed(key.Partition, startGen+1) {
		return // the partition was flushed while we searched
	}
	c.exact.Set(e)
	c.promotions.Add(1)
}

// Store writes an answer to both tiers: the exact tier before Store returns,
// the index through the write queue (dropped and counted when the queue is
// full; Store never blocks on it). Store sets e's Key, Partition, Fingerprint
// and Query from key, User to the keyed hash of key.EndUser, Created to now
// when zero, and Expires to Created+TTL when zero and a TTL is configured.
// e.Agreed is the caller's (Result.Foreign).
func (c *Cache) Store(ctx context.Context, key Key, e Entry) {
	c.store(key, e, nil)
}

// Miss is a lookup's handle for the write-back of the answer it did not
// serve (Result.Miss). The zero Miss is no lookup's: Looked is false.
type Miss struct {
	c   *Cache
	vec []float32 // the query's embedding; nil: the write-back embeds it
}

func (c *Cache) missOf(vec []float32) Miss { return Miss{c: c, vec: vec} }

// Looked reports whether m came from a lookup (a zero Miss did not).
func (m Miss) Looked() bool { return m.c != nil }

// Store writes the answer to the request the lookup was for, as
// Cache.Store does, with the lookup's embedding of its query. key is the
// lookup's key.
func (m Miss) Store(ctx context.Context, key Key, e Entry) {
	if m.c != nil {
		m.c.store(key, e, m.vec)
	}
}

// store is Store with the query's embedding vec when the caller has it.
func (c *Cache) store(key Key, e Entry, vec []float32) {
	if key.Exact == "" {
		return
	}
	now := c.now()
	query, seen := c.seen(key.Query)
	e.Key, e.Partition, e.Fingerprint, e.Query = key.Exact, key.Partition, key.Fingerprint, query
	e.User = c.userOf(key)
	if e.Created.IsZero() {
		e.Created = now
	}
	if e.Expires.IsZero() && c.ttl > 0 {
		e.Expires = e.Created.Add(c.ttl)
	}
	if e.Expired(now) {
		return
	}
	if e.Agreed {
		c.agreements.Add(1)
	}
	eligible := key.SemanticEligible()
	if !eligible {
		// Only the semantic tier reads a stored query: an exact-only entry
		// does not hold one (a long one would weigh more than its answer).
		e.Query = ""
	}
	c.exact.Set(e)
	if !eligible {
		return
	}
	if !seen {
		// Never a semantic candidate: kept in the exact tier only, like a
		// request without a query.
		return
	}
	if c.ix() != nil {
		it := queueItem{e: e, gen: c.gen.Load()}
		if len(vec) == c.embedder.Dimension() {
			it.vec = vec
		}
		c.q.push(it)
	} else {
		c.skipWrite()
	}
}

// Flush deletes the entries of partition from both tiers; "" deletes all.
// Index writes still queued for the partition are dropped.
func (c *Cache) Flush(ctx context.Context, partition string) error {
	c.flushLocal(partition)
	if c.deferFlush(partition) {
		return nil
	}
	index := c.ix()
	if index == nil {
		return nil
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := index.DeletePartition(ctx, partition); err != nil {
		c.indexErrors.Add(1)
		c.fail(ComponentIndex, fmt.Errorf("flush index: %w", err))
		return fmt.Errorf("flush index: %w", err)
	}
	c.ok(ComponentIndex)
	return nil
}

// flushLocal drops partition ("" for all) from the exact tier and the index
// writes still queued for it, leaving the index alone.
func (c *Cache) flushLocal(partition string) {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if len(c.marks.parts) >= maxPendingFlushes {
		// The marks are bounded: past that many flushed partitions, this
		// one becomes a flush of everything here (forgetting more of a
		// cache is always safe), which clears them.
		partition = ""
	}
	mark := c.gen.Add(1)
	if partition == "" {
		c.marks = flushMarks{all: mark, parts: map[string]uint64{}}
	} else {
		c.marks.parts[partition] = mark
	}
	c.exact.DeletePartition(partition)
}

// watchFlushes has a shared index apply other processes' flushes here. The
// partitions the marks remember are bounded like the exact tier's: a flush
// of all clears them.
func (c *Cache) watchFlushes(ix Index) {
	if s, ok := ix.(SharedIndex); ok {
		s.WatchFlushes(c.flushLocal)
	}
}

// stale reports whether a write begun at gen was overtaken by a flush of
// partition.
func (c *Cache) stale(partition string, gen uint64) bool {
	c.flushMu.RLock()
	defer c.flushMu.RUnlock()
	return c.marks.flushed(partition, gen+1)
}

// Stats returns the cache's counters. Counting the index may block, bounded
// by ctx.
func (c *Cache) Stats(ctx context.Context) Stats {
	s := Stats{
		ExactEntries: c.exact.Len(),
		IndexEntries: -1,
		QueueDepth:   c.q.depth(),
		QueueDrops:   c.q.drops.Load(),
	}
	s.Counters = Counters{
		WriteFailures:      c.writeFailures.Load(),
		EmbedErrors:        c.embedErrors.Load(),
		IndexErrors:        c.indexErrors.Load(),
		IndexWriteErrors:   c.indexWriteErrors.Load(),
		LongTextRejections: c.longText.Load(),
		ExactOnly:          c.exactOnly.Load(),
		Promotions:         c.promotions.Load(),
		CrossUserRefusals:  c.crossUserRefusals.Load(),
		Agreements:         c.agreements.Load(),
	}
	c.guardMu.Lock()
	s.GuardRejections = maps.Clone(c.guardRejects)
	c.guardMu.Unlock()
	c.openStats(&s)
	if index := c.ix(); index != nil {
		if n, err := index.Len(ctx); err == nil {
			s.IndexEntries = n
		}
	}
	return s
}

// Close writes the queued index entries (bounded by ctx), stops the write
// worker and, if New created it, closes the exact tier. It does not close
// Options.Index, which belongs to the caller; an index from Options.OpenIndex
// is closed (or, still opening past ctx, closed as soon as it opens). It is
// safe to call twice; Stores after or during Close are dropped.
func (c *Cache) Close(ctx context.Context) error {
	err := c.q.close(ctx)
	c.closeOpened(ctx)
	c.closeOnce.Do(func() {
		if c.ownExact {
			c.exact.Close()
		}
	})
	if err != nil {
		return fmt.Errorf("close cache: %w", err)
	}
	return nil
}
