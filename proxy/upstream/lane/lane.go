package lane

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Shed reasons: the label of breakwater_upstream_shed_total and the keys of
// TargetStats.Sheds.
const (
	ShedQueueFull    = "queue_full"           // the lane's or pool's queue was full
	ShedWaitBeyond   = "wait_beyond_deadline" // the expected queue wait exceeded the time left
	ShedQueueTimeout = "queue_timeout"        // still queued when the time left could no longer fit an answer
	ShedRateLimited  = "rate_limited"         // paced by the upstream's rate-limit state beyond the deadline
	ShedBreakerOpen  = "breaker_open"         // the breaker refused and no probe was free
	ShedRetryBudget  = "retry_budget"         // a retry found the lane's retry budget spent (and could fall back)
	ShedTooLarge     = "too_large"            // its cost exceeds a token budget's limit per minute: it can never fit
)

// ShedReasons lists every reason, for stats.
var ShedReasons = [...]string{ShedQueueFull, ShedWaitBeyond, ShedQueueTimeout, ShedRateLimited, ShedBreakerOpen, ShedRetryBudget, ShedTooLarge}

// Shed is a request a lane refused before it reached the upstream.
type Shed struct {
	Target, Reason    string
	RetryAfter        time.Duration
	Waiting, Inflight int
	Slots             int
	Left              time.Duration
}

func (e *Shed) Error() string {
	switch e.Reason {
	case ShedRetryBudget:
		return fmt.Sprintf("breakwater: the retry budget of %s is spent (retries of refusals are at most a tenth of first attempts); retry after %s",
			e.Target, AtLeastSecond(e.RetryAfter))
	case ShedQueueFull:
		return fmt.Sprintf("breakwater: the queue for %s is full (%d waiting for %d slots of its adaptive limit); retry after %s or raise max_queue",
			e.Target, e.Waiting, e.Slots, AtLeastSecond(e.RetryAfter))
	case ShedQueueTimeout:
		return fmt.Sprintf("breakwater: %s is at capacity: the request waited in its queue until no answer could arrive within the deadline (%d waiting, %d slots); retry after %s",
			e.Target, e.Waiting, e.Slots, AtLeastSecond(e.RetryAfter))
	}
	return fmt.Sprintf("breakwater: %s is at capacity: %d requests wait for %d slots, an expected wait of %s, beyond the %s left of the deadline; retry after %s",
		e.Target, e.Waiting, e.Slots, e.RetryAfter.Round(time.Millisecond), e.Left.Round(time.Millisecond), AtLeastSecond(e.RetryAfter))
}

func (e *Shed) Unwrap() error { return ErrShed }

// classRank orders a lane's queue: interactive classes first, batch classes
// last, everything else in between; within a rank, first come first served.
// Retries of a request the upstream refused go ahead of every class: they
// were admitted once already.
func ClassRank(class string, retry bool) int {
	switch {
	case retry:
		return 0
	case class == "realtime" || class == "interactive":
		return 1
	case class == "batch" || class == "background" || class == "bulk":
		return 3
	}
	return 2
}

// lane is the unit of admission: one target, and one forwarded key on that
// target when clients' keys are forwarded. It holds the adaptive limit, the
// pacing of sends (a token bucket at limit ÷ time per answer), the retry
// budget, the class-ordered queue and the rate-limit hold, so a key that the
// upstream limits never slows another key.
type Lane struct {
	t   Target
	key string // hash of the forwarded key; "" when the sidecar holds the key
	// maxQueue bounds the queue.
	maxQueue int
	pace     pacer
	// seed is the fleet's estimate the lane starts from (Set.Seed).
	seed func() (float64, time.Duration)

	// tok is the lane's token budgets (tokens.go), guarded by mu.
	tok tokens
	// tokWake is, after next, the soonest a waiter held by the token
	// budgets fits; 0 for none.
	tokWake time.Duration

	mu       sync.Mutex
	lim      aimd
	inflight int
	waiters  list.List // of *waiter, by (rank, arrival)
	waitE    float64   // EWMA of queue waits of granted requests, seconds
	used     time.Time // last acquire, for eviction
	// tokens is the send bucket: it fills at lim.pace() up to the slot count,
	// and every attempt takes one. tokensAt is when it was last filled.
	tokens   float64
	tokensAt time.Time
	// restarted is the end of the last hold the bucket was restarted for
	// at a random phase.
	restarted time.Time
	// budget is the retry budget in tenths of a retry: every first attempt
	// adds one, every retry of a refusal takes ten (retryBudgetStart at
	// first, at most retryBudgetMax).
	budget int
	// busySince is when the queue last went from empty to non-empty; zero
	// while it is empty. Sustained queueing turns the queue LIFO.
	busySince time.Time
	// lifoAfter is lifoAfterDefault; tests change it.
	lifoAfter time.Duration
	// wake dispatches when the bucket refills or a hold ends; wakeAt is when
	// it is due, zero when not armed.
	wake   *time.Timer
	wakeAt time.Time
	// present counts the requests on the lane: from their first attempt's
	// admission request until they leave the target (answered, failed,
	// fallen back), a live answer until its body ends. A request waiting
	// out a Retry-After between its attempts is present although it is in
	// neither the queue nor the model. See lone.
	present int
	// crowdAt is when present last exceeded loneMax; zero if it never did.
	crowdAt time.Time
	// arrived is when the last request came onto the lane, firstArrived
	// when the first of those on it now did (see burst).
	arrived, firstArrived time.Time
	// budgetWait is, after next, whether a retry waits for the retry
	// budget.
	budgetWait bool
	// patience is how long, lately, queued requests waited before their
	// clients went away (an EWMA, seconds; 0: none yet), and leftAt when
	// the last one did (see gaveUp).
	patience float64
	leftAt   time.Time
	// clockedUntil is the end of a refusal's Retry-After during which the
	// lane sends only into slots its own answers free (see Clock).
	clockedUntil time.Time
	// owed: while clocked, the lane's own answer freed a slot that waits
	// for a pacing token; the send goes when the token comes.
	owed bool
}

type waiter struct {
	rank     int
	queued   time.Time // when it joined the queue
	deadline time.Time // the request's: the lane's urgency, and when LIFO ends for it
	retry    bool      // a retry of a refusal: needs a retry budget token
	cost     perDim    // what it takes from the token budgets
	// noWait: a retry that must not wait for the budget (it can fall
	// back); budgetShed is set, before ready is closed, when it is turned
	// away for that instead of granted a slot.
	noWait, budgetShed bool
	// holdUntil is when the first hold or clock it waited for ends (the
	// one in force when it queued, or the first one set after); zero until
	// it waits for one.
	holdUntil time.Time
	ready     chan struct{}
}

// heldBy records, for a request of a lone lane (alone), the end of the
// first hold or clock it waits for.
func (w *waiter) heldBy(alone bool, end time.Time) {
	if alone && w.holdUntil.IsZero() {
		w.holdUntil = end
	}
}

// Retry budget: retries of congestion refusals (429, 529, an overload 503)
// are at most a tenth of a lane's first attempts, plus three, as Envoy's retry
// budgets (budget_percent) and Finagle's RetryBudget bound them, so a fleet
// of sidecars in front of a full model does not multiply its refusals. A
// retry beyond the budget waits in the queue for a token (every ten first
// attempts add one) and is shed with 429 + Retry-After when none comes
// before its deadline; it never becomes an extra upstream call. (When the
// route has another target, the request falls back to it instead.) Retries of
// breakage (other 5xx, timeouts, connection errors) are bounded by the
// attempts and the breaker instead.
const (
	retryCost        = 10 // tenths: a first attempt earns one
	retryBudgetStart = 3 * retryCost
	retryBudgetMax   = 10 * retryCost
)

// InitialRetryBudget is the retries a lane's budget holds at first.
const InitialRetryBudget = retryBudgetStart / retryCost

// retryBudget reports whether the lane's retry budget has a retry left, or
// the lane is lone and its retries need none.
func (l *Lane) RetryBudget() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.budget >= retryCost || l.lone(time.Now())
}

// loneMax is how many requests a lane may hold and still be lone: as many
// as a lane that knows nothing lets through (ColdSlots). The issue this
// answers had four prompts at once, each refused twice.
const loneMax = ColdSlots

// crowdMemory is how long a lane that held more than loneMax requests stays
// a crowd after it last did: the last requests of a peak are still the
// crowd's (twelve sidecars draining their queues into one model), while a
// sidecar that served a handful at a time for this long is lone again.
const crowdMemory = 10 * time.Second

// lone reports whether the lane holds a handful of requests at most (see
// present) and has not held more for crowdMemory: its pacing has nothing to
// divide. The caller holds l.mu.
//
// Pacing, the send bucket below one slot, the chains and the retry budget
// share a model among a crowd: a fleet of sidecars each with a queue fed by
// continuous arrivals, whose retries would multiply the refusals. A lane
// that holds at most loneMax requests is no crowd, whatever its limit
// learnt, and the requests the model refused go as in a lane that knows
// nothing (ColdSlots): their retries, and the requests that came with them,
// up to loneMax at once, with no pacing token and no retry budget (each
// request's attempts bound its retries), the hold of the upstream's
// Retry-After (or RetryInfo, or an exhausted rate-limit header) their only
// pacing. The retry of a request the model refused is then what a good
// client's retry is, sent once the wait the provider asked for has passed
// (RFC 9110 §10.2.3), within the request's attempts and deadline.
//
// The requests that came with the refused ones go with the retries, and
// wait out a hold in the queue to do so, when the lane's requests are a
// burst (see burst): an app's prompts sent at once. Requests that came apart
// are new demand, paced by what the lane learnt: twelve sidecars starting
// cold each hold a handful of requests in their first second, and sending
// them unpaced at the end of every hold refused each other in rounds (93 to
// 103 upstream 429s in a run, against 74–78, and a replica starved to 32
// answers of 50). The refusals still cut the limit, so a crowd that comes
// later starts from what the model said.
//
// Paced by its limit instead, a lone request refused twice waited a pacing
// gap after the hold, 2.4 to 4.8 s for a model answering in 0.3 s, and
// missed an 8 s deadline that the provider's own 1 s waits fitted three
// times over; four prompts at once waited for each other's tokens and for a
// budget that only new requests refill, and three of four reached a 60 s
// deadline.
func (l *Lane) lone(now time.Time) bool {
	return l.present <= loneMax && (l.crowdAt.IsZero() || now.Sub(l.crowdAt) >= crowdMemory)
}

// burstWindow is how far apart the requests of one burst reach a lane: an
// app's prompts sent at once, a few milliseconds apart behind the proxy's
// own work on a busy machine. A fleet's sidecars see their arrivals 75 to
// 300 ms apart at the demo's peak (40 requests a second over 3 to 12).
const burstWindow = 50 * time.Millisecond

// burst reports whether the requests on the lane came together, within
// burstWindow of the first: the app sent them at once. The caller holds
// l.mu.
func (l *Lane) burst() bool { return l.arrived.Sub(l.firstArrived) <= burstWindow }

// waitsInQueue reports whether a request held by the lane's Retry-After
// waits for it in the queue (a lone lane's burst: it goes with the retries
// when the hold ends) rather than before it.
func (l *Lane) WaitsInQueue() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lone(time.Now()) && l.burst()
}

// enter counts a request on the lane (see present); exit uncounts it.
func (l *Lane) Enter() {
	l.mu.Lock()
	l.present++
	l.arrived = time.Now()
	if l.present == 1 {
		l.firstArrived = l.arrived
	}
	if l.present > loneMax {
		l.crowdAt = time.Now()
	}
	l.mu.Unlock()
}

func (l *Lane) Exit() {
	l.mu.Lock()
	l.present--
	l.dispatch(time.Now()) // the lane may have become lone
	l.mu.Unlock()
}

// lifoAfterDefault is how long the queue must have been non-empty, at least, before
// it serves the newest request first (Facebook's adaptive LIFO, as in
// "Fail at Scale", ACM Queue 13(8), 2015): under sustained queueing the
// oldest requests are the ones whose clients are about to give up, so serving
// them first delivers answers to nobody. Without sustained queueing nothing
// changes: first in, first out. The wait is at least two answers' time.
const lifoAfterDefault = time.Second

// New makes a lane of t for the forwarded key (its hash; "" when the sidecar
// holds the key): its limit grows up to ceiling (<= 0: DefaultMaxConcurrency)
// and maxQueue requests may wait (0: DefaultMaxQueue; < 0: none).
func New(t Target, key string, ceiling, maxQueue int) *Lane {
	if maxQueue == 0 {
		maxQueue = DefaultMaxQueue
	}
	l := &Lane{t: t, key: key, maxQueue: max0(maxQueue), lim: newAIMD(ceiling), budget: retryBudgetStart, lifoAfter: lifoAfterDefault}
	l.tokens = float64(l.lim.slots())
	return l
}

// expectedWait is how long a request of rank would wait for a slot now, and
// how many requests it would wait behind. Under sustained queueing the queue
// is LIFO within a rank, so only lower ranks are ahead. The caller holds l.mu.
func (l *Lane) expectedWait(rank int, now time.Time) (time.Duration, int) {
	lifo := l.lifo(now)
	ahead := 0
	for e := l.waiters.Front(); e != nil; e = e.Next() {
		if r := e.Value.(*waiter).rank; r < rank || r == rank && !lifo {
			ahead++
		}
	}
	if ahead == 0 && l.inflight < l.lim.slots() && l.pace.wait(now) == 0 {
		return 0, 0
	}
	r := l.lim.rate(now)
	if r <= 0 {
		return 0, ahead
	}
	return time.Duration(float64(ahead+1) / r * float64(time.Second)), ahead
}

// lifo reports whether the queue has been non-empty long enough to serve the
// newest first. The caller holds l.mu.
func (l *Lane) lifo(now time.Time) bool {
	return !l.busySince.IsZero() && now.Sub(l.busySince) >= max(l.lifoAfter, 2*l.lim.service())
}

// acquire takes a slot, waiting in class order when the limit is reached, the
// send bucket is empty, the upstream's Retry-After holds the lane, or (for a
// retry) the retry budget is spent. It sheds at once (a *Shed) when the
// queue is full or the expected wait plus an answer's time exceeds what is
// left before deadline, and sheds a waiter that is still queued when an
// answer could no longer fit. A retry that finds the budget spent waits for
// it when wait is set, and is shed at once (ShedRetryBudget) otherwise. It
// returns ctx.Err() when ctx ends first.
func (l *Lane) Acquire(ctx context.Context, rank int, retry, mayWait bool, deadline time.Time) error {
	return l.AcquireCost(ctx, rank, retry, mayWait, deadline, Cost{})
}

// AcquireCost is Acquire for a request of cost c: it waits, besides, until
// the lane's token budgets cover c (see next), and fails at once with a
// *TooLarge when c exceeds a budget's limit per minute.
func (l *Lane) AcquireCost(ctx context.Context, rank int, retry, mayWait bool, deadline time.Time, c Cost) error {
	now := time.Now()
	left := deadline.Sub(now)
	l.mu.Lock()
	cost := l.tok.costOf(c)
	if d := l.tok.tooLarge(cost); d >= 0 {
		l.mu.Unlock()
		return &TooLarge{Target: l.t.Name(), Limit: dimNames[d], Cost: int(math.Ceil(cost[d])), PerMinute: int(l.tok.b[d].limit)}
	}
	if l.used.IsZero() {
		if l.seed != nil {
			l.lim.seed(l.seed())
			l.tokens = float64(l.lim.slots())
		}
		defer l.t.LimitMoved(l.lim.limit) // counted from first use
	}
	l.used = now
	alone := retry && l.lone(now) // a new request is paced as the lane learnt: see lone
	expected, ahead := l.expectedWait(rank, now)
	if alone {
		expected = l.loneWait(ahead, now)
	}
	fits := true
	if l.tok.known() {
		tw := l.tok.wait(now, cost)
		expected = max(expected, tw)
		fits = tw == 0 && !l.held(now)
	}
	service := l.lim.service()
	slots := l.lim.slots()
	var reason string
	retryAfter := expected
	switch {
	case service > left:
		// Not even an answer's time is left: an attempt would be cut by the
		// deadline, after costing the upstream the work.
		reason = ShedWaitBeyond
	case alone && ahead == 0 && fits && l.inflight < l.loneSlots():
		// A lone lane's retry goes when its own Retry-After has passed
		// (the caller waited it), whatever hold or clock a later refusal
		// of another of the lane's few requests set: four prompts refused
		// together, whose retries reached the lane a millisecond apart,
		// sent one and held the rest for another second behind its
		// refusal (2.1 s answers became 3.1 to 5.1 s).
		l.grantLone(now, retry, cost)
		l.mu.Unlock()
		return nil
	case ahead == 0 && fits && l.inflight < slots && (!retry || l.budget >= retryCost) && l.pace.wait(now) == 0 && !l.clocked(now) && l.takeToken(now, 1):
		l.grant(now, retry, cost)
		l.mu.Unlock()
		return nil
	case retry && !alone && !mayWait && l.budget < retryCost:
		reason, retryAfter = ShedRetryBudget, max(expected, ShedRetryAfter)
	case l.waiters.Len() >= l.maxQueue:
		reason, retryAfter = ShedQueueFull, max(expected, ShedRetryAfter)
	case expected+service > left:
		reason = ShedWaitBeyond
	}
	shed := &Shed{Target: l.t.Name(), Reason: reason, RetryAfter: retryAfter, Waiting: l.waiters.Len(),
		Inflight: l.inflight, Slots: slots, Left: left}
	if reason != "" {
		l.mu.Unlock()
		return shed
	}
	w := &waiter{rank: rank, queued: now, deadline: deadline, retry: retry, cost: cost, noWait: !mayWait, ready: make(chan struct{})}
	if end := maxTime(now.Add(l.pace.wait(now)), l.clockedUntil); end.After(now) {
		w.holdUntil = end
	}
	e := l.insert(w, now)
	if retry && !alone && l.budget < retryCost {
		l.t.BudgetWaited()
	}
	l.dispatch(now) // a slot may be free, waiting only for the bucket
	l.t.Queued(1)
	l.mu.Unlock()
	defer l.t.Queued(-1)

	// Leave the queue while an answer can still arrive before the deadline,
	// with room for one more answer's time, since service is an average.
	timer := time.NewTimer(max(left-2*service, 0))
	defer timer.Stop()
	select {
	case <-w.ready:
		if w.budgetShed {
			shed.Reason, shed.RetryAfter = ShedRetryBudget, ShedRetryAfter
			return shed
		}
		if time.Until(deadline) > service {
			l.waited(time.Since(now))
			return nil
		}
		l.Release() // granted too late for an answer to fit: pass the slot on
	case <-ctx.Done():
		l.leave(e, w)
		if errors.Is(ctx.Err(), context.Canceled) {
			l.gaveUp(time.Since(now))
		}
	case <-timer.C:
		l.leave(e, w)
	}
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		return err
	}
	l.mu.Lock()
	now = time.Now()
	expected, _ = l.expectedWait(rank, now)
	shed.Waiting, shed.Inflight, shed.Slots = l.waiters.Len(), l.inflight, l.lim.slots()
	l.mu.Unlock()
	shed.Reason, shed.RetryAfter, shed.Left = ShedQueueTimeout, max(expected, l.pace.wait(now)), time.Until(deadline)
	return shed
}

// grant counts an admitted attempt: a slot, its cost in the token budgets,
// and the retry budget (a first attempt adds to it, a retry spends it). The
// caller holds l.mu.
func (l *Lane) grant(now time.Time, retry bool, cost perDim) {
	l.inflight++
	l.tok.take(now, cost)
	if retry {
		l.budget -= retryCost
		l.t.RetrySent()
		return
	}
	l.budget = min(l.budget+1, retryBudgetMax)
}

// grantLone admits an attempt of a lone lane (see lone): a slot, a pacing
// token if the bucket has one (the lane's rate stays what it sent), and for
// a retry no budget (a first attempt adds to it as ever). The caller holds
// l.mu.
func (l *Lane) grantLone(now time.Time, retry bool, cost perDim) {
	l.inflight++
	l.tok.take(now, cost)
	if r := l.lim.pace(); r > 0 {
		l.fill(now, r)
		if l.tokens >= 1 {
			l.tokens--
		}
	}
	if !retry {
		l.budget = min(l.budget+1, retryBudgetMax)
		return
	}
	l.t.LoneRetry()
}

// loneSlots is how many attempts a lone lane lets through: loneMax, as a
// cold lane, within MaxConcurrency. The caller holds l.mu.
func (l *Lane) loneSlots() int { return max(l.lim.slots(), min(loneMax, int(l.lim.ceiling))) }

// loneWait is the expected wait of a lone lane's request behind ahead others:
// the hold, then an answer's time for every loneMax ahead. The caller holds
// l.mu.
func (l *Lane) loneWait(ahead int, now time.Time) time.Duration {
	return l.pace.wait(now) + time.Duration(ahead/l.loneSlots())*l.lim.service()
}

// takeToken takes a send token from the bucket when it holds need (one, or
// a chain's worth), reporting whether it did. Before the first answer the
// lane is not paced. The caller holds l.mu.
func (l *Lane) takeToken(now time.Time, need float64) bool {
	r := l.lim.pace()
	if r <= 0 {
		return true
	}
	l.fill(now, r)
	if l.tokens < need {
		return false
	}
	l.tokens--
	return true
}

// chainLen is how many requests a lane that shares the model, below one
// slot, sends in a row: it saves its pacing tokens until it has that many (or
// one for each request waiting, if fewer), sends one, and sends the next the
// moment its answer comes, into the slot that answer just freed. The model's
// slot changes hands between sidecars once per chain instead of once per
// request, and only that first send can find the model full: a sidecar's
// answer frees a slot that none of the others knows about yet. The rate is
// the lane's pace all the same. A lane behind (urgency above one) does not
// wait to save a chain: at its lowest pace three tokens take 15 s. Twelve
// sidecars sending one at a time at random moments refused each other as
// random arrivals at a model of four do (76–104 upstream 429s a run, the
// fewest replica at 76–94 % of the most); in chains of three, 69–76 and
// 90–98 %.
const chainLen = 3

// chains reports whether the lane sends in chains: it shares the model and
// is below one slot. The caller holds l.mu.
func (l *Lane) chains() bool { return l.lim.shared() && l.lim.limit < 1 }

// bucketCap is how many tokens the bucket holds at most: the slot count, or
// a chain's worth. The caller holds l.mu.
func (l *Lane) bucketCap() float64 {
	if l.chains() {
		return chainLen
	}
	return float64(l.lim.slots())
}

// restartBucket sets the send bucket as of the end of a Retry-After hold. A
// lane that shares the model, or has no answer yet and requests queued, sends
// one to two pacing gaps after the end, at a random phase, so sidecars held
// together do not send together again; a cold lane with nothing queued sends
// at the end (a lone request is retried as soon as its Retry-After allows).
// A lane that sends in chains and is behind (urgency above one) keeps the
// tokens it saved for the chain whose first send was refused: losing them
// left it silent for a hold and three gaps at its lowest pace, 10 s and more,
// while its queue reached the deadline. Any other lane keeps its bucket: a
// lone sidecar refills the model at once when the hold ends (spreading its
// sends cost it 3 % of its answers to clients that give up after 3 s). The
// refusal restarts the bucket, and so does a dispatch during the hold (a hold
// set by rate-limit headers has no refusal), once per hold at a random phase:
// a cold lane whose queue fills while held is spread too. The caller holds
// l.mu.
func (l *Lane) restartBucket(end time.Time) {
	switch {
	case l.lim.serviceE == 0 && l.waiters.Len() == 0:
		l.tokens, l.tokensAt = 1, end
	case l.lim.shared() || l.lim.serviceE == 0:
		if end.Sub(l.restarted).Abs() < time.Millisecond {
			return // this hold's phase is drawn
		}
		keep := 0.0
		if l.chains() && l.urgency(end) > 1 {
			keep = max(0, min(l.tokens, chainLen-1))
		}
		l.tokens, l.tokensAt, l.restarted = keep-l.t.Rand(), end, end
	}
}

// fill adds the tokens earned since the bucket was last filled at rate r,
// up to the slot count (so an idle lane may send a burst of at most its
// limit at once). The caller holds l.mu.
func (l *Lane) fill(now time.Time, r float64) {
	if now.Before(l.tokensAt) {
		return // restarted as of a hold's end
	}
	if !l.tokensAt.IsZero() {
		l.tokens += now.Sub(l.tokensAt).Seconds() * r
	}
	l.tokens = min(l.tokens, l.bucketCap())
	l.tokensAt = now
}

// leave takes w out of the queue, passing its slot on if it was granted
// meanwhile.
func (l *Lane) leave(e *list.Element, w *waiter) {
	l.mu.Lock()
	select {
	case <-w.ready:
		l.mu.Unlock()
		if !w.budgetShed {
			l.Release()
		}
	default:
		l.waiters.Remove(e)
		if l.waiters.Len() == 0 {
			l.busySince = time.Time{}
		}
		l.mu.Unlock()
	}
}

// insert queues w behind every waiter of the same or a lower rank. The caller
// holds l.mu.
func (l *Lane) insert(w *waiter, now time.Time) *list.Element {
	if l.waiters.Len() == 0 {
		l.busySince = now
	}
	for e := l.waiters.Back(); e != nil; e = e.Prev() {
		if e.Value.(*waiter).rank <= w.rank {
			return l.waiters.InsertAfter(w, e)
		}
	}
	return l.waiters.PushFront(w)
}

func (l *Lane) waited(d time.Duration) {
	const alpha = 0.2
	l.mu.Lock()
	l.waitE += alpha * (d.Seconds() - l.waitE)
	l.mu.Unlock()
	l.t.QueueWait(d)
}

// next picks the waiter to serve: the first of the best rank, or under
// sustained queueing the newest of it, unless the oldest of it has waited
// as long as it has left; a retry only while the budget has a token. nil
// when none may go. The caller holds l.mu.
//
// LIFO is for clients that give up before the deadline. Those leave the
// queue when they do, so a request still queued after half its deadline has
// a client that waits for it, and it goes first. Served last in, first out
// to the end, the requests queued first in a long peak sat under newer ones
// until the deadline shed them, although the lane answered as many as it
// would have first in, first out (twelve sidecars at three times the model's
// capacity: 51 to 69 of 600 shed, most at the bottom of a queue that
// drained within 15 s after their deadline; 5 to 11 with this).
func (l *Lane) next(now time.Time) *list.Element {
	lifo := l.lifo(now)
	lone := l.lone(now)
	budgets := l.tok.known()
	l.tokWake, l.budgetWait = 0, false
	if budgets && l.held(now) {
		return nil // a request that waited long enough for the budget goes next
	}
	var pick *list.Element
	for e := l.waiters.Front(); e != nil; {
		w := e.Value.(*waiter)
		if budgets {
			// Token budgets: a request the budget does not cover yet lets
			// the ones behind it that it covers go (a short request is not
			// stuck behind a long one), until it is reserved (held).
			if tw := l.tok.wait(now, w.cost); tw > 0 {
				if l.tokWake == 0 || tw < l.tokWake {
					l.tokWake = tw
				}
				e = e.Next()
				continue
			}
		}
		if w.retry && !lone && l.budget < retryCost {
			l.budgetWait = true
			next := e.Next()
			if w.noWait {
				// Spent since it queued: it falls back instead of waiting.
				l.waiters.Remove(e)
				w.budgetShed = true
				close(w.ready)
			}
			e = next
			continue
		}
		if pick != nil && w.rank != pick.Value.(*waiter).rank {
			break
		}
		if pick == nil && lifo && now.Sub(w.queued) >= w.deadline.Sub(now) {
			return e // the oldest has waited half its time: it goes first
		}
		pick = e
		if !lifo {
			break
		}
		e = e.Next()
	}
	if l.waiters.Len() == 0 {
		l.busySince = time.Time{}
	}
	return pick
}

// held reports whether a queued request that the token budgets do not
// cover has waited long enough to be reserved for next (see reserveAfter),
// setting tokWake to when it fits. The caller holds l.mu.
func (l *Lane) held(now time.Time) bool {
	for e := l.waiters.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		if tw := l.tok.wait(now, w.cost); tw > 0 && l.reserved(w, now) {
			l.tokWake = tw
			return true
		}
	}
	return false
}

// dispatch hands free slots to waiters while the bucket has tokens and no
// Retry-After holds the lane, arming the wake timer for when it will. The
// caller holds l.mu.
func (l *Lane) dispatch(now time.Time) { l.dispatchChain(now, false) }

// dispatchChain is dispatch; chained when the lane's own answer just freed a
// slot, which a chain (see chainLen) takes at once with a single token, as
// does a lane behind. The caller holds l.mu.
func (l *Lane) dispatchChain(now time.Time, chained bool) {
	lone := l.lone(now)
	if !chained && l.clocked(now) && !l.owed && !lone {
		l.wakeIn(now, l.clockedUntil.Sub(now))
		return
	}
	if !l.clocked(now) {
		l.owed = false
	}
	ownSlot := chained || l.owed
	for l.inflight < l.lim.slots() || l.lone(now) && l.inflight < l.loneSlots() {
		e := l.next(now)
		if e == nil {
			if l.tokWake > 0 {
				l.wakeIn(now, l.tokWake+time.Millisecond)
			}
			if l.budgetWait && l.present <= loneMax && !l.crowdAt.IsZero() {
				// Retries wait for a budget that only first attempts refill;
				// when the last crowd is crowdMemory old the lane is lone and
				// they go without one. Nothing else may come to dispatch
				// then: a burst's retries sat in the queue to their deadline.
				l.wakeIn(now, l.crowdAt.Add(crowdMemory).Sub(now)+time.Millisecond)
			}
			return
		}
		w := e.Value.(*waiter)
		// See lone: the hold is the only pacing of a lone lane's retries,
		// and of the requests that came with those the model refused.
		alone := lone && (w.retry || l.burst())
		if !alone && l.inflight >= l.lim.slots() {
			return
		}
		// A lone lane's request waits out one hold or clock, the first it
		// meets, not those that later refusals of the lane's retries set:
		// four prompts at once, one of them a millisecond behind the first
		// refusal, waited two holds and was answered after 4.1 s where
		// the others took 2.1 s.
		if !alone || w.holdUntil.IsZero() || now.Before(w.holdUntil) {
			if !chained && l.clocked(now) && !l.owed {
				w.heldBy(alone, l.clockedUntil)
				l.wakeIn(now, l.clockedUntil.Sub(now))
				return
			}
			if hold := l.pace.wait(now); hold > 0 {
				w.heldBy(alone, now.Add(hold))
				l.restartBucket(now.Add(hold))
				l.wakeIn(now, hold)
				return
			}
		}
		need := 1.0
		if l.chains() && !chained && l.urgency(now) <= 1 {
			need = max(1, min(chainLen, float64(l.waiters.Len())))
		}
		if !alone && !l.takeToken(now, need) {
			// A clocked lane whose own answer freed a slot sends into it
			// when its pacing allows, not at the end of the Retry-After:
			// three sidecars each refused every two seconds idled a slot
			// for the rest of each one-second hold (147–164 answers for
			// clients that give up after 3 s). Sending at once regardless
			// of pacing kept every slot with the lanes that held it, and
			// starved two of six replicas to 0 answers.
			l.owed = ownSlot && l.clocked(now)
			l.wakeIn(now, time.Duration((need-l.tokens)/l.lim.pace()*float64(time.Second))+time.Millisecond)
			return
		}
		l.waiters.Remove(e)
		if l.waiters.Len() == 0 {
			l.busySince = time.Time{}
		}
		if alone {
			l.grantLone(now, w.retry, w.cost)
		} else {
			l.grant(now, w.retry, w.cost)
		}
		ownSlot, l.owed = false, false
		close(w.ready)
	}
}

// wakeIn arms the wake timer to dispatch after d, unless it is already due
// sooner. The caller holds l.mu.
func (l *Lane) wakeIn(now time.Time, d time.Duration) {
	at := now.Add(d)
	if !l.wakeAt.IsZero() && !l.wakeAt.After(at) {
		return
	}
	l.wakeAt = at
	if l.wake == nil {
		l.wake = time.AfterFunc(d, l.woken)
		return
	}
	l.wake.Reset(d)
}

func (l *Lane) woken() {
	l.mu.Lock()
	l.wakeAt = time.Time{}
	l.dispatch(time.Now())
	l.mu.Unlock()
}

// release returns a slot without a verdict.
func (l *Lane) Release() {
	l.mu.Lock()
	l.inflight--
	l.dispatch(time.Now())
	l.mu.Unlock()
}

// abandon returns the slot of an attempt sent at sent that was cut before
// its answer (a stream whose client went away, an attempt cut by the
// deadline). The provider does not stop generating a request its client
// dropped (and bills it), so the slot stays taken until the answer would
// have come (the longest time an answer took lately, since a slower answer
// than the mean keeps the model busy just as well): freeing it at once sends the
// next request into a model that is still busy.
func (l *Lane) Abandon(sent time.Time) {
	l.t.Abandoned()
	l.mu.Lock()
	hold := time.Until(sent.Add(l.lim.serviceLong()))
	l.mu.Unlock()
	if hold <= 0 {
		l.Release()
		return
	}
	time.AfterFunc(hold, l.Release)
}

// done returns the slot of an attempt sent at sent and feeds its verdict to
// the adaptive limit.
func (l *Lane) Done(sent time.Time, d time.Duration, o Outcome) {
	now := time.Now()
	l.mu.Lock()
	before, paceBefore := l.lim.limit, l.lim.belowOne()
	switch o {
	case Answered:
		l.lim.answered(d, l.inflight, l.urgency(now), now)
	case Congested:
		l.lim.refused(sent, now, l.inflight, l.urgency(now))
		hold := l.pace.wait(now) // holdLane set it before done
		if l.lim.serviceE == 0 {
			l.lim.coldHold = hold.Seconds() / 2
		}
		if hold > 0 {
			l.restartBucket(now.Add(hold))
		}
	}
	after, paceAfter := l.lim.limit, l.lim.belowOne()
	l.inflight--
	l.dispatchChain(now, o == Answered)
	l.mu.Unlock()
	if after != before { // used: done follows an acquire
		l.t.LimitMoved(after - before)
	}
	if paceAfter != paceBefore {
		l.t.PaceMoved(paceAfter - paceBefore)
	}
}

// Cap holds the lane's limit at most c slots: what the fleet's capacity
// gate grants this replica on the lane (upstream.Gate's Share). An
// attempt the gate admits never meets a refusal the lane learns from
// (see upstream's exchange), so a gated lane's limit would otherwise grow
// with every answer (30 to 56 slots per replica in front of a model that
// takes 4 to 8), and every replica would send at it the moment the gate
// goes. c is also the level the lane goes on from without the gate (as a
// level it counted itself).
func (l *Lane) Cap(c float64) {
	if c <= 0 {
		return
	}
	l.mu.Lock()
	before, paceBefore := l.lim.limit, l.lim.belowOne()
	if !l.lim.capAt(c) {
		l.mu.Unlock()
		return
	}
	after, paceAfter := l.lim.limit, l.lim.belowOne()
	used := !l.used.IsZero()
	l.mu.Unlock()
	if used && after != before {
		l.t.LimitMoved(after - before)
	}
	if paceAfter != paceBefore {
		l.t.PaceMoved(paceAfter - paceBefore)
	}
}

// urgency is how far behind the lane's queue is: the time to send every
// waiting request at the lane's pace, over the time the newest one has left
// before its deadline, or before its client gives up when clients have been
// seen to (see gaveUp). Above one, the queue cannot be served in time at this
// pace; 0 when nothing waits or the lane is not paced. The pace, not the
// measured rate of answers: a lane cut to the floor after a fast start
// measured its past, and took itself to be ahead while its last requests
// reached the deadline. The caller holds l.mu.
func (l *Lane) urgency(now time.Time) float64 {
	b := l.waiters.Back()
	if b == nil {
		return 0
	}
	r := l.lim.pace()
	if r <= 0 {
		return 0
	}
	// Clients that gave up lately tell the time they wait, when they do
	// not state it (a deadline header): the request's end is the sooner.
	w := b.Value.(*waiter)
	end := w.deadline
	if l.patience > 0 && now.Sub(l.leftAt) < crowdMemory {
		end = minTime(end, w.queued.Add(time.Duration(l.patience*float64(time.Second))))
	}
	left := end.Sub(now).Seconds()
	if left <= 0 {
		return urgencyMax
	}
	return float64(l.waiters.Len()) / r / left
}

// gaveUp records that a queued request's client went away after waiting d
// in the queue: the lane learns how long its clients wait (patience), which
// urgency reads. Clients that give up after 3 s and say nothing of it left
// a lane that took them for patient (a 60 s deadline) growing at its
// slowest, while its queue turned over every 3 s: three sidecars answered
// 164 where going straight answers 189, and 189–191 with this. The queue
// wait is at most the client's whole wait, so the patience learnt errs
// short, towards urgency.
func (l *Lane) gaveUp(d time.Duration) {
	const alpha = 0.2
	l.mu.Lock()
	if l.patience == 0 {
		l.patience = d.Seconds()
	} else {
		l.patience += alpha * (d.Seconds() - l.patience)
	}
	l.leftAt = time.Now()
	l.mu.Unlock()
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// minTime is the sooner of a and b.
func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// serviceTime is the lane's time per answer.
func (l *Lane) ServiceTime() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lim.service()
}

// Stats is one lane's view for the target's stats.
type Stats struct {
	Limit, Rate   float64
	Pace          float64 // sends per second while the limit is below one slot, else 0
	Budget        float64 // retries
	Wait, Service time.Duration
	Queued        int
	Paced         bool
	Used          bool
	Tokens        TokenStats
}

func (l *Lane) Snapshot(now time.Time) Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		Limit: l.lim.limit, Rate: l.lim.rate(now), Service: l.lim.service(), Budget: float64(l.budget) / retryCost,
		Wait:   time.Duration(l.waitE * float64(time.Second)),
		Queued: l.waiters.Len(), Paced: l.pace.wait(now) > 0, Used: !l.used.IsZero(),
		Pace: l.lim.belowOne(), Tokens: l.tokenStats(now),
	}
}

// idle reports whether the lane holds nothing worth keeping: no request in
// flight or queued and no rate-limit hold.
func (l *Lane) Idle(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight == 0 && l.waiters.Len() == 0 && l.present == 0 && l.pace.wait(now) == 0
}

// Clock is Hold for a refusal for want of room at the model (its
// concurrency or overload limit) that comes back until t: while the lane has
// other attempts at the model, it sends, until t, only into the slot one of
// its own answers frees, the moment that answer comes, or when its pacing
// next has a token (owed), the limit being cut (as TCP's sends are clocked
// by acknowledgements after a loss, RFC 5681 §3.2); a lane with no
// other attempt in flight is held until t, as Hold does, since no answer of
// its own will come to clock it. Held outright, a lane idles the slots its
// answers free for the whole Retry-After: six sidecars starting together,
// each refused once in its cold burst, left a model that answers 12 a
// second answering 4 a second for two seconds. The refused request itself
// waits out the Retry-After either way (the caller's retry wait).
func (l *Lane) Clock(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight <= 1 {
		l.pace.hold(t)
		return
	}
	if t.After(l.clockedUntil) {
		l.clockedUntil = t
	}
}

// clocked reports whether the lane sends only into slots its own answers
// free at now (see Clock). The caller holds l.mu.
func (l *Lane) clocked(now time.Time) bool { return now.Before(l.clockedUntil) }
