package lane

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limit names the dimension of a provider's limit a refusal hit: the label
// of breakwater_upstream_refusals_total and the keys of TargetStats.Refusals.
const (
	LimitRequests     = "requests"      // requests per minute (OpenAI RPM, Gemini RequestsPerMinute)
	LimitTokens       = "tokens"        // tokens per minute, input and output together (OpenAI TPM)
	LimitInputTokens  = "input_tokens"  // input tokens per minute (Anthropic ITPM, Gemini InputTokensPerModelPerMinute)
	LimitOutputTokens = "output_tokens" // output tokens per minute (Anthropic OTPM)
	LimitConcurrency  = "concurrency"   // the model is full: 529, an overload 503, a refusal that names no limit
)

// Limits lists every dimension, for stats.
var Limits = [...]string{LimitRequests, LimitTokens, LimitInputTokens, LimitOutputTokens, LimitConcurrency}

// Token dimensions a lane budgets.
const (
	dimTokens = iota
	dimInput
	dimOutput
	nDims
)

// dimOf is the budget of a limit, -1 for one that is not a token budget.
func dimOf(limit string) int {
	switch limit {
	case LimitTokens:
		return dimTokens
	case LimitInputTokens:
		return dimInput
	case LimitOutputTokens:
		return dimOutput
	}
	return -1
}

var dimNames = [nDims]string{LimitTokens, LimitInputTokens, LimitOutputTokens}

// Cost is what a request costs a provider's token budgets at admission:
// its estimated input tokens, and the output the provider reserves for it
// (max_tokens and its kin). Output 0 means the request sets none: the lane
// charges the output its answers have typically had; below 0, the request
// has no output (embeddings).
type Cost struct {
	Input, Output int
}

// defaultTypicalOutput is the output charged for a request that sets no
// reservation before the lane has seen an answer's usage.
const defaultTypicalOutput = 256

// perDim is a cost on every budget: tokens (input and output), input,
// output.
type perDim [nDims]float64

// bucket is one token budget of a lane: a token bucket that refills
// continuously at limit per minute up to limit, as Anthropic's ITPM and OTPM
// are ("continuous token bucket",
// https://docs.anthropic.com/en/api/rate-limits) and OpenAI's TPM behave. A
// request takes its cost when it is sent, and the answer's usage corrects
// it. limit 0: unknown, every cost fits.
type bucket struct {
	limit float64 // tokens per minute; 0 unknown
	level float64 // tokens available at at; may go below 0 when an answer cost more than its estimate
	at    time.Time
	// learnt: the limit came from the provider (a header, the numbers of a
	// refusal), not from what the lane saw admitted.
	learnt bool
	// sent is the tokens sent in the last minute, one cell a second: what
	// the provider admitted before it refused, when it says nothing else.
	sent    [60]float64
	sentSec int64
	// since is when the lane began sending without a minute's pause: the
	// tokens sent in the last minute are a rate only once it is a minute
	// old.
	since time.Time
	// share is the part of the provider's budget this lane spends (an
	// EWMA; 0: unknown, taken as all of it). The provider's budget is the
	// fleet's: every replica reads the same remaining count, and a replica
	// that spent all of it, and refilled at the whole rate, would spend it
	// N times over. The lane paces to its share: it refills at share×limit
	// a minute, up to share×limit, and takes share of a remaining count.
	share float64
	// readAt and readRem are the last remaining count read (readAt: when
	// the request that carried it was sent, about when the provider
	// counted it) that the share was measured from.
	readAt  time.Time
	readRem float64
	// admitted is the tokens the lane sent that the provider did not
	// refuse, ever; refusedAt and admittedAt the last refusal without
	// numbers the limit was estimated from, and admitted then
	// (refusedOn).
	admitted   float64
	refusedAt  time.Time
	admittedAt float64
}

// part is the share of the provider's budget the lane spends, 1 when it is
// not known.
func (b *bucket) part() float64 {
	if b.share <= 0 {
		return 1
	}
	return b.share
}

// ceil is the most the lane's bucket holds: its share of the limit.
func (b *bucket) ceil() float64 { return b.part() * b.limit }

// rate is the lane's refill in tokens a second: its share of the limit.
func (b *bucket) rate() float64 { return b.part() * b.limit / 60 }

func (b *bucket) fill(now time.Time) {
	if b.limit <= 0 {
		b.at = now
		return
	}
	if !b.at.IsZero() && now.After(b.at) {
		b.level = min(b.ceil(), b.level+now.Sub(b.at).Seconds()*b.rate())
	}
	b.at = now
}

// wait is how long until c fits, 0 when it does now. A cost above the
// limit fits a full bucket: a limit the lane only estimated (or one that
// fell while the request waited) never holds a request for ever, nor the
// requests behind one reserved for next. The caller filled b.
func (b *bucket) wait(c float64) time.Duration {
	if b.limit <= 0 {
		return 0
	}
	c = min(c, b.ceil())
	if b.level >= c {
		return 0
	}
	return time.Duration((c - b.level) / b.rate() * float64(time.Second))
}

func (b *bucket) take(now time.Time, c float64) {
	if b.limit > 0 {
		b.level -= c
	}
	b.admitted += c
	sec := now.Unix()
	if sec-b.sentSec >= 60 {
		b.sent = [60]float64{}
		b.since = now
	} else {
		for s := b.sentSec + 1; s <= sec; s++ {
			b.sent[s%60] = 0
		}
	}
	b.sentSec = max(b.sentSec, sec)
	b.sent[sec%60] += c
}

// unsend takes a refused request's cost c back out of the tokens sent: the
// provider did not admit it. (Its cell may go below zero: the sum within the
// minute stays right.)
func (b *bucket) unsend(now time.Time, c float64) {
	b.admitted -= c
	if now.Unix()-b.sentSec < 60 {
		b.sent[b.sentSec%60] -= c
	}
}

// lastMinute is the tokens sent within the last minute.
func (b *bucket) lastMinute(now time.Time) float64 {
	if now.Unix()-b.sentSec >= 60 {
		return 0
	}
	var sum float64
	for _, v := range b.sent {
		sum += v
	}
	return max(sum, 0)
}

// tokens is a lane's token budgets and what it learnt of its answers.
type tokens struct {
	b [nDims]bucket
	// typicalOut is the output tokens answers had (an EWMA; 0: none yet).
	typicalOut float64
	// inScale is the input tokens answers reported over those estimated
	// (an EWMA; 0: none yet): the estimate (characters over four) learns
	// the provider's tokenizer from its usage.
	inScale float64
	// spent is the tokens the lane has sent, ever, per budget; hist its
	// recent values by when (a ring, next its next cell): what the lane
	// spent between two of the provider's readings, to tell its own
	// spending from the fleet's.
	spent perDim
	hist  [spentHist]struct {
		at    int64 // UnixNano
		spent perDim
	}
	next int
	// whole: the lane takes the provider's whole budget as its own and
	// measures no share of it (WholeBudget).
	whole bool
	// keepsReserve: the provider keeps the output a request reserved
	// (max_tokens) whatever its answer used, as OpenAI does: it charges a
	// request at admission and "unsuccessful requests contribute to your
	// per-minute limit" (https://platform.openai.com/docs/guides/rate-limits),
	// and Azure OpenAI counts prompt plus max_tokens. Learnt from OpenAI's
	// x-ratelimit-*-tokens headers; Anthropic corrects its output estimate
	// once the answer is made (https://docs.anthropic.com/en/api/rate-limits),
	// so its lanes give the unused reservation back.
	keepsReserve bool
}

// spentHist bounds the history of what a lane spent: the grants of the
// last few seconds of a busy lane, enough to span shareWindow.
const spentHist = 64

// shareWindow is the least time between two remaining counts the share is
// measured over: over a shorter one, the answers in flight and the
// provider's rounding (Anthropic rounds its counts) are most of the
// difference.
const shareWindow = time.Second

// spentAt is what the lane had spent by t, false when t is older than its
// history.
func (t *tokens) spentAt(at time.Time) (perDim, bool) {
	n := at.UnixNano()
	for k := 1; k <= spentHist; k++ {
		h := &t.hist[(t.next-k+spentHist)%spentHist]
		if h.at == 0 {
			return perDim{}, k > 1 || t.spent == perDim{}
		}
		if h.at <= n {
			return h.spent, true
		}
	}
	return perDim{}, false
}

// costOf is c on every budget, the output defaulting to the typical.
func (t *tokens) costOf(c Cost) perDim {
	out := float64(max(c.Output, 0))
	if c.Output == 0 {
		out = t.typicalOut
		if out <= 0 {
			out = defaultTypicalOutput
		}
	}
	in := float64(c.Input)
	if t.inScale > 0 {
		in *= t.inScale
	}
	return perDim{in + out, in, out}
}

// known reports whether any budget has a limit: without one the lane admits
// by its concurrency and pace alone, as before token budgets.
func (t *tokens) known() bool {
	for i := range t.b {
		if t.b[i].limit > 0 {
			return true
		}
	}
	return false
}

// wait is how long until every budget covers c, 0 when they do now.
func (t *tokens) wait(now time.Time, c perDim) time.Duration {
	var w time.Duration
	for i := range t.b {
		t.b[i].fill(now)
		w = max(w, t.b[i].wait(c[i]))
	}
	return w
}

func (t *tokens) take(now time.Time, c perDim) {
	for i := range t.b {
		t.b[i].fill(now)
		t.b[i].take(now, c[i])
		t.spent[i] += c[i]
	}
	t.hist[t.next].at, t.hist[t.next].spent = now.UnixNano(), t.spent
	t.next = (t.next + 1) % spentHist
}

// measureShare learns b's share of the provider's budget from a remaining
// count rem read at sent: between the last reading and this one, the
// provider's budget refilled at its limit and lost what the whole fleet
// spent; of that, mine is what this lane sent meanwhile. A reading older
// than the last is not used (answers come back out of order). The caller
// holds l.mu.
func (t *tokens) measureShare(dim int, sent time.Time, rem float64) {
	if t.whole {
		return
	}
	b := &t.b[dim]
	if !b.readAt.IsZero() && !sent.After(b.readAt.Add(shareWindow)) {
		return
	}
	prevAt, prevRem := b.readAt, b.readRem
	b.readAt, b.readRem = sent, rem
	if prevAt.IsZero() {
		return
	}
	was, ok1 := t.spentAt(prevAt)
	now, ok2 := t.spentAt(sent)
	if !ok1 || !ok2 {
		return
	}
	refill := sent.Sub(prevAt).Seconds() * b.limit / 60
	all := min(b.limit, prevRem+refill) - rem
	mine := now[dim] - was[dim]
	sh := b.part()
	switch {
	case all < bindsAt*refill:
		// The fleet left part of the budget unspent: take more of it (a
		// lane left alone on it grows so, as its share leaves the rest
		// unspent).
		sh += shareStep
	case mine >= bindsAt*all:
		// The budget binds, and the lane spent about all of it: it keeps
		// its share. (Grown then, a lane that alone sent in a reading,
		// one long request among a lumpy mix, took more than its part:
		// three replicas' shares reached 1, 0.3 and 0.2.)
	case b.share == 0:
		// The budget binds, and others spend it too, the first time: a
		// lane that took the whole budget goes at once down to what it
		// spent of it (a fleet that begins together finds its shares in
		// one reading).
		sh = min(sh*(1-shareCut), mine/all)
	default:
		// The budget binds, and others spend it too: give up a part of
		// the share. Cut by a part of each share and grown by the same
		// step, the replicas' shares meet (additive increase,
		// multiplicative decrease, as TCP's congestion windows share a
		// link). Cut down to what the lane spent in the reading, as the
		// first is, they did not: a reading spans a second or two, a few
		// requests of a lumpy mix, and a lane cut to its part of one that
		// others' long requests filled sent little in the next, and was
		// cut again (three replicas' shares stayed 0.05–0.15 against one
		// at 0.9, and it answered 83 to their 104).
		sh *= 1 - shareCut
	}
	b.share = min(max(sh, minShare), 1)
}

// WholeBudget makes the lane take the provider's whole budget as its own,
// measuring no share of it, as a lane did before it shared a fleet's
// budget: the baseline a test of the sharing compares a fleet with.
func (l *Lane) WholeBudget() {
	l.mu.Lock()
	l.tok.whole = true
	l.mu.Unlock()
}

// The steps of a lane's share of a budget (see measureShare): a budget
// binds when the fleet spent bindsAt of what it refilled; while it does not,
// the share grows by shareStep; while it does, it is cut by shareCut.
const (
	bindsAt   = 0.9
	shareStep = 0.1
	shareCut  = 0.2
)

// minShare is the least share of a budget a lane paces to: a lane the
// fleet crowded out still sends, and so measures its share again.
const minShare = 0.05

// tooLarge returns the budget whose limit c exceeds (it can never fit), -1
// for none.
func (t *tokens) tooLarge(c perDim) int {
	for i := range t.b {
		if l := t.b[i].limit; l > 0 && t.b[i].learnt && c[i] > l {
			return i
		}
	}
	return -1
}

// TooLarge is a request whose cost exceeds a provider's limit per minute:
// it can never be admitted, so it is answered at once, never queued or
// retried (OpenAI answers such a request "Request too large … Limit L,
// Requested R").
type TooLarge struct {
	Target          string
	Limit           string // LimitTokens, LimitInputTokens or LimitOutputTokens
	Cost, PerMinute int
}

func (e *TooLarge) Error() string {
	return fmt.Sprintf("Request too large for %s on %s per min: Limit %d, Requested %d. The input or output tokens must be reduced in order to run successfully.",
		e.Target, strings.ReplaceAll(e.Limit, "_", " "), e.PerMinute, e.Cost)
}

// Reconcile corrects the budgets by the usage an answer reported for a
// request admitted at cost c: the difference is given back (or taken), as
// Anthropic corrects its output estimate afterwards; and the output is
// learnt as the typical one for requests that set no reservation.
func (l *Lane) Reconcile(c Cost, input, output int) {
	const alpha = 0.2
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	charged := l.tok.costOf(c)
	used := perDim{float64(input + output), float64(input), float64(output)}
	back := perDim{0, charged[dimInput] - used[dimInput], charged[dimOutput] - used[dimOutput]}
	if l.tok.keepsReserve && c.Output > 0 && back[dimOutput] > 0 {
		// The provider kept the reservation: giving it back would send
		// requests its budget refuses until its next remaining count.
		back[dimOutput] = 0
	}
	back[dimTokens] = back[dimInput] + back[dimOutput]
	for i := range l.tok.b {
		b := &l.tok.b[i]
		if b.limit <= 0 {
			continue
		}
		b.fill(now)
		b.level = min(b.ceil(), b.level+back[i])
		if !b.learnt {
			// A limit learnt from what the provider admitted before it
			// refused, with nothing else to go by, grows with every answer
			// by a twentieth of its cost, so a provider whose budget is
			// larger than that minute showed is found again.
			b.limit += used[i] / 20
		}
	}
	if c.Input > 0 && input > 0 {
		r := min(max(float64(input)/float64(c.Input), 0.1), 10)
		if l.tok.inScale == 0 {
			l.tok.inScale = r
		} else {
			l.tok.inScale += alpha * (r - l.tok.inScale)
		}
	}
	switch {
	case c.Output < 0: // no output: nothing to learn
	case l.tok.typicalOut == 0:
		l.tok.typicalOut = float64(output)
	default:
		l.tok.typicalOut += alpha * (float64(output) - l.tok.typicalOut)
	}
	if l.tok.known() {
		l.dispatch(now) // what was given back may let a waiter go
	}
}

// tokenHeaders are the (limit, remaining) header pairs of each budget:
// OpenAI's x-ratelimit-{limit,remaining}-tokens
// (https://platform.openai.com/docs/guides/rate-limits) and Anthropic's
// anthropic-ratelimit-{tokens,input-tokens,output-tokens}-{limit,remaining}
// (https://docs.anthropic.com/en/api/rate-limits), whose remaining counts
// are rounded. keepsReserve marks the provider that keeps a request's
// output reservation (see tokens.keepsReserve).
var tokenHeaders = [...]struct {
	dim              int
	limit, remaining string
	keepsReserve     bool
}{
	{dimTokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", true},
	{dimTokens, "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", false},
	{dimInput, "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining", false},
	{dimOutput, "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Remaining", false},
}

func headerCount(h http.Header, name string) (float64, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, false
	}
	return n, true
}

// observe learns the budgets from an answer's rate-limit headers: the
// limit, and the remaining count, which every replica of a fleet sees (the
// provider's budget is the fleet's), so the lane measures its share of the
// budget from it (measureShare) and its level never stays above its share
// of it. The remaining count was the provider's when it admitted the
// request, sent at sent: what the lane's bucket refilled since is added.
// The caller holds l.mu.
func (t *tokens) observe(now, sent time.Time, h http.Header) {
	for _, th := range tokenHeaders {
		limit, ok := headerCount(h, th.limit)
		if !ok || limit <= 0 {
			continue
		}
		t.keepsReserve = t.keepsReserve || th.keepsReserve
		b := &t.b[th.dim]
		b.fill(now)
		if b.limit <= 0 {
			b.level = limit
		}
		b.limit, b.learnt = limit, true
		if rem, ok := headerCount(h, th.remaining); ok {
			t.measureShare(th.dim, sent, rem)
			since := max(now.Sub(sent), 0).Seconds() * b.rate()
			b.level = min(b.level, b.part()*rem+since)
		}
	}
}

// refusedOn learns from a refusal on a token budget: the budget is spent
// now. The provider's numbers (OpenAI's "Limit L, Used U") set its limit
// and level; without them (Gemini's QuotaFailure names the quota only), the
// tokens the lane sent within the last minute are what the provider admitted
// in its minute, its limit as far as the lane can tell, unless it knows one.
// The caller holds l.mu.
func (t *tokens) refusedOn(now time.Time, dim int, limit, used float64, cost perDim) {
	for i := range t.b {
		t.b[i].unsend(now, cost[i])
	}
	b := &t.b[dim]
	b.fill(now)
	switch {
	case limit > 0:
		b.limit, b.learnt = limit, true
		b.level = min(b.level, limit-used)
		if used <= 0 {
			b.level = min(b.level, 0)
		}
	case b.limit <= 0 || !b.learnt:
		// Between two refusals the provider's bucket went from spent to
		// spent: what it admitted in between is what it refilled, its
		// limit × the time ÷ a minute (less, when the bucket was full a
		// while, or others spent it too: then the lane paces to what it
		// got, and each answer grows the estimate, see Reconcile). So
		// the limit is estimated from refusals estimateAfter apart, with
		// a sample of several requests' worth admitted between them.
		// Else from a whole minute of sending: what a shorter burst got
		// through is the bucket's level when it began, and a lane that
		// sent a few requests in the minute saw the spending of others
		// (a fleet's replicas, other apps on the key), not the limit.
		// Before either the refusal only spends the budget, and the hold
		// of its Retry-After (or RetryInfo) and the concurrency limit
		// pace the lane.
		got, span := b.admitted-b.admittedAt, now.Sub(b.refusedAt)
		switch {
		case b.refusedAt.IsZero() || span > time.Minute:
			b.refusedAt, b.admittedAt = now, b.admitted
		case span >= estimateAfter && got >= minSample*cost[dim] && got > 0:
			b.limit = got * float64(time.Minute) / float64(span)
			b.refusedAt, b.admittedAt = now, b.admitted
		}
		if seen := b.lastMinute(now); b.limit <= 0 && now.Sub(b.since) >= time.Minute && seen >= minSample*cost[dim] && seen > 0 {
			b.limit = seen
		}
		b.level = min(b.level, 0)
	default:
		b.level = min(b.level, 0)
	}
}

// RefusedOn tells the lane the provider refused a request of cost c on the
// budget of limit (a Limit… name; others are ignored), with its numbers
// when it gave them (0 otherwise).
func (l *Lane) RefusedOn(limit string, perMinute, used int, c Cost) {
	d := dimOf(limit)
	if d < 0 {
		return
	}
	l.mu.Lock()
	l.tok.refusedOn(time.Now(), d, float64(perMinute), float64(used), l.tok.costOf(c))
	l.mu.Unlock()
}

// reserveAfter is how long, at least, a request that does not fit the
// token budget waits before it is reserved for next: beyond it, no request
// behind it is sent before it is, so a stream of short requests cannot
// starve a long one. It waits at least as long as the budget takes to earn
// its cost, so short requests that fit meanwhile go ahead of it.
const reserveAfter = 500 * time.Millisecond

// reserved reports whether w, which does not fit, has waited long enough to
// be reserved for next. The caller holds l.mu.
func (l *Lane) reserved(w *waiter, now time.Time) bool {
	earn := time.Duration(0)
	for i := range l.tok.b {
		if b := &l.tok.b[i]; b.limit > 0 {
			earn = max(earn, time.Duration(min(w.cost[i], b.ceil())/b.rate()*float64(time.Second)))
		}
	}
	return now.Sub(w.queued) >= max(reserveAfter, earn)
}

// estimateAfter is the least time between two refusals without numbers
// that a limit is estimated over: over less, the answers in flight at each
// end are most of what the provider admitted between them.
const estimateAfter = 5 * time.Second

// minSample is how many times the refused request's cost the lane must
// have sent within the minute to take what it sent as the limit.
const minSample = 4

// TokenStats is a lane's token budgets for stats: per dimension, the limit
// per minute (0: unknown) and what is left now.
type TokenStats struct {
	Limit, Left   map[string]float64
	TypicalOutput float64
}

func (l *Lane) tokenStats(now time.Time) TokenStats {
	var s TokenStats
	for i := range l.tok.b {
		b := &l.tok.b[i]
		if b.limit <= 0 {
			continue
		}
		b.fill(now)
		if s.Limit == nil {
			s.Limit, s.Left = make(map[string]float64), make(map[string]float64)
		}
		s.Limit[dimNames[i]], s.Left[dimNames[i]] = b.limit, max(b.level, 0)
	}
	s.TypicalOutput = l.tok.typicalOut
	return s
}
