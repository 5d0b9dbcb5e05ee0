package lane

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"time"
)

// tokenLane is a lane whose token budget (tokens per minute) the provider
// told it, with left tokens in it now.
func tokenLane(t *testing.T, perMinute, left float64) *Lane {
	l := testLane(t, 8)
	l.tok.b[dimTokens] = bucket{limit: perMinute, level: left, at: time.Now(), learnt: true}
	return l
}

// granted starts an acquire of cost c and reports its result on the channel.
func granted(l *Lane, c Cost) chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.AcquireCost(context.Background(), 2, false, true, time.Now().Add(time.Minute), c) }()
	return ch
}

// TestTokenBudgetLetsAShortRequestPassALongOne: a long request the budget
// does not cover yet waits, and a short one that came after it and fits is
// sent at once instead of waiting behind it.
func TestTokenBudgetLetsAShortRequestPassALongOne(t *testing.T) {
	l := tokenLane(t, 60_000, 1000) // 1000 tokens a second; 1000 left
	l.lifoAfter = time.Hour         // first in, first out: only the budget reorders
	long := granted(l, Cost{Input: 4000, Output: 1000})
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	select {
	case err := <-long:
		t.Fatalf("a request of 5000 tokens with 1000 left was admitted at once (%v)", err)
	default:
	}
	short := granted(l, Cost{Input: 100, Output: 100})
	select {
	case err := <-short:
		if err != nil {
			t.Fatal(err)
		}
		if n := stats(l).queued.Load(); n != 1 {
			t.Errorf("%d queued when the short request went, want the long one still waiting", n)
		}
	case err := <-long:
		t.Fatalf("the long request went first (%v); want the short one, which fits, at once", err)
	}
	if err := <-long; err != nil { // 4200 more tokens: about 4 s at 1000 a second
		t.Fatal(err)
	}
}

// TestTokenBudgetReservesALongRequestThatWaited: once a long request has
// waited long enough it is reserved for next: a short request that came
// after goes after it, although the budget covers the short one first.
func TestTokenBudgetReservesALongRequestThatWaited(t *testing.T) {
	l := tokenLane(t, 600_000, 0) // 10 000 tokens a second, none left
	long := granted(l, Cost{Input: 2000, Output: 1000})
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 })
	l.mu.Lock()
	l.waiters.Front().Value.(*waiter).queued = time.Now().Add(-time.Minute) // it waited a minute
	l.mu.Unlock()
	short := granted(l, Cost{Input: 100, Output: 100})
	select {
	case err := <-long:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-short:
		t.Fatalf("the short request went first (%v); want the long one that waited a minute", err)
	}
	if err := <-short; err != nil {
		t.Fatal(err)
	}
}

// TestTokenBudgetFromHeaders: an answer's x-ratelimit-*-tokens headers
// tell the lane its budget and what is left of it (the fleet's spending
// included); a request that costs more than is left waits.
func TestTokenBudgetFromHeaders(t *testing.T) {
	l := testLane(t, 8)
	now := time.Now()
	h := http.Header{}
	h.Set("X-Ratelimit-Limit-Tokens", "60000")
	h.Set("X-Ratelimit-Remaining-Tokens", "100")
	l.Observe(now, now, h, time.Minute)
	s := l.Snapshot(time.Now()).Tokens
	if s.Limit[LimitTokens] != 60000 || s.Left[LimitTokens] > 200 {
		t.Fatalf("budget after the headers = %v, left %v; want 60000 a minute, about 100 left", s.Limit, s.Left)
	}
	ch := granted(l, Cost{Input: 1500, Output: 500})
	waitUntil(t, func() bool { return stats(l).queued.Load() == 1 || len(ch) == 1 })
	if len(ch) == 1 {
		t.Fatal("a request of 2000 tokens with about 100 left was sent at once")
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}

	// Anthropic's input and output budgets, separately.
	a := testLane(t, 8)
	h = http.Header{}
	h.Set("Anthropic-Ratelimit-Input-Tokens-Limit", "30000")
	h.Set("Anthropic-Ratelimit-Input-Tokens-Remaining", "29000")
	h.Set("Anthropic-Ratelimit-Output-Tokens-Limit", "8000")
	h.Set("Anthropic-Ratelimit-Output-Tokens-Remaining", "0")
	now = time.Now()
	a.Observe(now, now, h, time.Millisecond)
	s = a.Snapshot(time.Now()).Tokens
	if s.Limit[LimitInputTokens] != 30000 || s.Limit[LimitOutputTokens] != 8000 || s.Left[LimitOutputTokens] > 200 {
		t.Fatalf("Anthropic budgets = %v, left %v", s.Limit, s.Left)
	}
}

// TestTokenBudgetTooLarge: a request whose cost exceeds the limit per
// minute the provider stated is refused at once with *TooLarge, never
// queued; one within it is admitted.
func TestTokenBudgetTooLarge(t *testing.T) {
	l := testLane(t, 8)
	l.RefusedOn(LimitTokens, 10_000, 0, Cost{})
	start := time.Now()
	err := l.AcquireCost(t.Context(), 2, false, true, time.Now().Add(time.Minute), Cost{Input: 12_000, Output: 100})
	var big *TooLarge
	if !errors.As(err, &big) || big.Limit != LimitTokens || big.PerMinute != 10_000 || big.Cost != 12_100 {
		t.Fatalf("acquire = %v, want TooLarge on tokens (10000 a minute, 12100 requested)", err)
	}
	if d := time.Since(start); d > time.Second || stats(l).queued.Load() != 0 {
		t.Errorf("refused after %s, queued %d; want at once, never queued", d, stats(l).queued.Load())
	}
}

// TestTokenBudgetLearntFromARefusalWithoutNumbers: a refusal on input
// tokens that gives no numbers (Gemini's QuotaFailure names the quota only)
// spends the budget, and takes what the lane sent in the last minute as the
// limit per minute.
func TestTokenBudgetLearntFromARefusalWithoutNumbers(t *testing.T) {
	l := testLane(t, 8)
	c := Cost{Input: 500, Output: 10}
	for range 6 {
		if err := l.AcquireCost(t.Context(), 2, false, true, time.Now().Add(time.Minute), c); err != nil {
			t.Fatal(err)
		}
	}
	l.RefusedOn(LimitInputTokens, 0, 0, c) // the sixth was refused
	if s := l.Snapshot(time.Now()).Tokens; s.Limit != nil {
		t.Fatalf("a budget %v learnt from a burst of a moment; want none before a minute of sending", s.Limit)
	}
	l.mu.Lock()
	l.tok.b[dimInput].since = time.Now().Add(-time.Minute) // as if it had sent for a minute
	l.mu.Unlock()
	l.RefusedOn(LimitInputTokens, 0, 0, Cost{})
	s := l.Snapshot(time.Now()).Tokens
	if s.Limit[LimitInputTokens] != 2500 || s.Left[LimitInputTokens] > 100 {
		t.Fatalf("input budget after the refusal = %v, left %v; want the 2500 the provider admitted within the minute, spent", s.Limit, s.Left)
	}
}

// TestTokenBudgetAboveAnEstimatedLimit: a request that costs more than a
// limit the lane only estimated is sent once the bucket is full, and does
// not hold the lane for ever.
func TestTokenBudgetAboveAnEstimatedLimit(t *testing.T) {
	l := tokenLane(t, 600, 595) // 10 a second, full in half a second
	l.tok.b[dimTokens].learnt = false
	start := time.Now()
	if err := l.AcquireCost(t.Context(), 2, false, true, time.Now().Add(time.Minute), Cost{Input: 2000, Output: 100}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("sent after %s, want once the bucket is full, in half a second", d)
	}
}

// TestShareOfAFleetsBudget: a lane's share of a budget its fleet spends
// grows by a step while the fleet leaves part of it unspent, is cut by a
// part of itself while others spend it too (at once to what the lane spent
// only the first time, when it took the whole budget), and holds while the
// lane alone spent it. Cut to what it spent in each reading, or grown when
// it alone sent in one, three replicas' shares on the token peak drifted
// apart (0.05 against 0.9) and one answered 83 to the others' 104.
func TestShareOfAFleetsBudget(t *testing.T) {
	tests := []struct {
		name      string
		share     float64
		all, mine float64 // spent between the two readings, by the fleet and by the lane
		want      float64
	}{
		{"unspent", 0.3, 1000, 900, 0.4},
		{"others spent it", 0.3, 2000, 100, 0.24},
		{"others spent it, the first time", 0, 2000, 100, 0.05},
		{"the lane alone spent it", 0.3, 2000, 1900, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tk tokens
			tk.b[dimTokens] = bucket{limit: 60_000, learnt: true, share: tt.share} // 1000 a second
			t0 := time.Now()
			tk.take(t0, perDim{})
			tk.measureShare(dimTokens, t0, 10_000)
			tk.take(t0.Add(time.Second), perDim{tt.mine})
			// Two seconds refilled 2000; the fleet spent all of them.
			tk.measureShare(dimTokens, t0.Add(2*time.Second), 10_000+2000-tt.all)
			if got := tk.b[dimTokens].share; math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("share %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReconcileKeepsWhatTheProviderKeeps: OpenAI keeps a request's
// max_tokens reservation whatever its answer used, so a lane that reads
// OpenAI's headers gives none of it back (it gave it back, and sent
// requests the provider refused until its next remaining count: the
// token peak's 13 and 14 upstream 429s through one sidecar, where the
// target is 10); Anthropic corrects its output estimate, so its lanes do.
func TestReconcileKeepsWhatTheProviderKeeps(t *testing.T) {
	for _, tt := range []struct {
		name          string
		limit, remain string
		want          float64
	}{
		{"openai", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", 0},
		{"anthropic", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Remaining", 390},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := tokenLane(t, 600, 600) // 10 a second
			c := Cost{Input: 100, Output: 400}
			if err := l.AcquireCost(t.Context(), 2, false, true, time.Now().Add(time.Minute), c); err != nil {
				t.Fatal(err)
			}
			sent := time.Now() // as the caller sends: once the lane admitted it
			h := http.Header{}
			h.Set(tt.limit, "600")
			h.Set(tt.remain, "100")
			l.Observe(time.Now(), sent, h, time.Minute)
			l.Release()
			before := l.Snapshot(time.Now()).Tokens.Left[LimitTokens]
			l.Reconcile(c, 100, 10)
			got := l.Snapshot(time.Now()).Tokens.Left[LimitTokens] - before
			if got < tt.want || got > tt.want+20 {
				t.Errorf("given back %v tokens, want %v (10 a second refill aside)", got, tt.want)
			}
		})
	}
}

// TestReconcileGivesBackTheEstimate: an answer that used less than its
// reservation gives the difference back, and its output becomes the
// typical output charged to requests that set none.
func TestReconcileGivesBackTheEstimate(t *testing.T) {
	l := tokenLane(t, 600, 600) // 10 a second
	c := Cost{Input: 100, Output: 400}
	if err := l.AcquireCost(t.Context(), 2, false, true, time.Now().Add(time.Minute), c); err != nil {
		t.Fatal(err)
	}
	l.Release()
	before := l.Snapshot(time.Now()).Tokens.Left[LimitTokens]
	l.Reconcile(c, 90, 10)
	after := l.Snapshot(time.Now()).Tokens
	if got := after.Left[LimitTokens] - before; got < 390 || got > 420 {
		t.Errorf("given back %v tokens, want the 400 reserved and not used", got)
	}
	if after.TypicalOutput != 10 {
		t.Errorf("typical output = %v, want the answer's 10", after.TypicalOutput)
	}
	if got := l.tok.costOf(Cost{Input: 5}); got[dimOutput] != 10 {
		t.Errorf("a request without max_tokens reserves %v, want the typical 10", got[dimOutput])
	}
	// The provider counted 90 input tokens where 100 were estimated: the
	// next estimate is scaled to its tokenizer.
	if got := l.tok.costOf(Cost{Input: 1000}); got[dimInput] != 900 {
		t.Errorf("an estimate of 1000 input tokens costs %v, want 900 after an answer counted 0.9 of its estimate", got[dimInput])
	}
}
