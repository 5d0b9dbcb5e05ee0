package fleet

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/lib/setting"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// Any, as a budget's Tenant or Class, gives each tenant (or class) a
// bucket of its own; empty shares one bucket among all of them.
const Any = "*"

// Budget is one [[budgets]] entry: the requests and tokens the requests it
// matches may send upstream. A limit of 0 is no limit, in the file as here.
type Budget struct {
	// Name labels the budget in headers, /stats and /metrics. Empty
	// (default): "budget<N>" by its position.
	Name string `toml:"name"`
	// Tenant is the partition the budget applies to: a cache partition as
	// /stats and the metrics name it (the HMAC of the client's key and
	// partition headers), Any ("*") for each tenant separately, or empty
	// (default) for all tenants together.
	Tenant string `toml:"tenant"`
	// Class is the X-Breakwater-Class it applies to ("default" for a
	// request naming none), Any ("*") for each class separately, or empty
	// (default) for all classes together.
	Class string `toml:"class"`
	// RequestsPerMinute, TokensPerMinute and TokensPerDay are the limits:
	// requests sent upstream per minute, tokens (input + output, as the
	// answers report them) per minute and per day. 0 (default): no limit
	// on that one; at least one must be set.
	RequestsPerMinute int64 `toml:"requests_per_minute"`
	TokensPerMinute   int64 `toml:"tokens_per_minute"`
	TokensPerDay      int64 `toml:"tokens_per_day"`
}

// ValidateBudgets reports every problem of bs, each a *setting.Error
// naming the [[budgets]] key (indexed by position).
func ValidateBudgets(bs []Budget) error {
	var es setting.Errors
	seen := map[string]bool{}
	for i, b := range bs {
		key := fmt.Sprintf("budgets[%d]", i)
		if b.RequestsPerMinute < 0 || b.TokensPerMinute < 0 || b.TokensPerDay < 0 {
			es.Add(key, b.Name, "limits must be >= 0 (0: no limit)")
		}
		if b.RequestsPerMinute == 0 && b.TokensPerMinute == 0 && b.TokensPerDay == 0 {
			es.Add(key, b.Name, "set requests_per_minute, tokens_per_minute or tokens_per_day")
		}
		if b.Name != "" {
			if strings.ContainsAny(b.Name, ": \t\r\n") {
				// The name is a part of the budget's Redis keys and headers.
				es.Add(key+".name", b.Name, "no spaces or colons")
			}
			if seen[b.Name] {
				es.Add(key+".name", b.Name, "another budget has this name")
			}
			seen[b.Name] = true
		}
		if len(b.Class) > 32 {
			es.Add(key+".class", b.Class, "must be a short pool name such as realtime or batch, or \"*\"")
		}
	}
	return es.Err()
}

// dimensions of a budget.
const (
	dimRequests = iota
	dimTokensMinute
	dimTokensDay
	dims
)

var dimNames = [dims]string{"requests", "tokens", "tokens_day"}

var dimPeriods = [dims]float64{60e3, 60e3, 86400e3}

func (b *Budget) limit(d int) int64 {
	switch d {
	case dimRequests:
		return b.RequestsPerMinute
	case dimTokensMinute:
		return b.TokensPerMinute
	}
	return b.TokensPerDay
}

// matches reports whether the budget applies to a request of tenant and
// class.
func (b *Budget) matches(tenant, class string) bool {
	return (b.Tenant == "" || b.Tenant == Any || b.Tenant == tenant) &&
		(b.Class == "" || b.Class == Any || b.Class == class)
}

// bucket names the budget's bucket for tenant and class.
func (b *Budget) bucket(tenant, class string) string {
	t, c := "", ""
	if b.Tenant != "" {
		t = tenant
	}
	if b.Class != "" {
		c = class
	}
	return b.Name + ":" + t + ":" + c
}

// Reservation is what a request drew on: give it back with Settle.
type Reservation struct {
	f      *Fleet
	remote bool
	takes  []take // per bucket: cost = what was taken
	budget []int  // the budget of each take
	est    int64
}

// Exceeded is the error of a request refused by a budget: an
// *upstream.Error (429) wraps it, and the proxy copies its Headers to the
// answer.
type Exceeded struct {
	Budget     string
	Limit      string // "requests", "tokens" or "tokens_day"
	Max        int64
	Remaining  int64
	RetryAfter time.Duration
}

func (e *Exceeded) Error() string {
	return fmt.Sprintf("budget %q: %s limit %d reached; retry after %s", e.Budget, e.Limit, e.Max, e.RetryAfter.Round(time.Second))
}

// Headers are the limit and what remains of it, under OpenAI's names
// (x-ratelimit-limit-requests, x-ratelimit-remaining-tokens, ...: the
// headers its clients already read, https://platform.openai.com/docs/guides/rate-limits),
// and the budget that refused.
func (e *Exceeded) Headers() http.Header {
	dim := "requests"
	if e.Limit != "requests" {
		dim = "tokens"
	}
	return http.Header{
		"X-Ratelimit-Limit-" + strings.ToUpper(dim[:1]) + dim[1:]:     {strconv.FormatInt(e.Max, 10)},
		"X-Ratelimit-Remaining-" + strings.ToUpper(dim[:1]) + dim[1:]: {strconv.FormatInt(e.Remaining, 10)},
		"X-Breakwater-Budget": {e.Budget + "; limit=" + e.Limit},
	}
}

// CodeBudgetExceeded is the error code of a request a budget refused.
const CodeBudgetExceeded = "budget_exceeded"

// Reserve draws a request of tenant and class, estimated at est tokens,
// from every budget that matches it: all of them or none. No budget
// matches: a nil Reservation and no error. Refused: an *upstream.Error with
// status 429 wrapping *Exceeded.
func (f *Fleet) Reserve(ctx context.Context, tenant, class string, est int64) (*Reservation, error) {
	if class == "" {
		class = "default"
	}
	var (
		stack  [6]take
		bstack [6]int
	)
	takes, budgets := stack[:0], bstack[:0]
	for i := range f.budgets {
		b := &f.budgets[i]
		if !b.matches(tenant, class) {
			continue
		}
		bk := f.key("budget", b.bucket(tenant, class))
		for d := range dims {
			lim := b.limit(d)
			if lim == 0 {
				continue
			}
			cost := float64(1)
			if d != dimRequests {
				cost = float64(min(est, lim))
			}
			takes = append(takes, take{key: bk + ":" + dimNames[d], period: dimPeriods[d], limit: float64(lim), cost: cost})
			budgets = append(budgets, i*dims+d)
		}
	}
	if len(takes) == 0 {
		return nil, nil
	}
	v, remote := f.reserve(ctx, takes)
	if v.Refused >= 0 {
		bd := budgets[v.Refused]
		b := &f.budgets[bd/dims]
		f.stats.refused[bd/dims].Add(1)
		ex := &Exceeded{Budget: b.Name, Limit: dimNames[bd%dims], Max: b.limit(bd % dims),
			Remaining: v.Remaining[v.Refused], RetryAfter: max(v.RetryAfter, time.Second)}
		// Whole seconds, rounded up: Retry-After (RFC 9110, 10.2.3) has no
		// fractions, and earlier would be refused again.
		ex.RetryAfter = (ex.RetryAfter + time.Second - 1).Truncate(time.Second)
		return nil, &upstream.Error{Status: http.StatusTooManyRequests, Code: CodeBudgetExceeded,
			Message: "breakwater: " + ex.Error(), RetryAfter: ex.RetryAfter, Err: ex}
	}
	for _, bd := range budgets {
		f.stats.admitted[bd/dims].Add(1)
	}
	return &Reservation{f: f, remote: remote, takes: append([]take(nil), takes...), budget: append([]int(nil), budgets...), est: est}, nil
}

// Settle reconciles a reservation: used tokens (known) replace the
// estimate; failed gives everything back (no answer, or an answer the
// provider does not bill: an error status). Neither: the estimate stands.
// A nil Reservation does nothing.
func (r *Reservation) Settle(ctx context.Context, used int64, known, failed bool) {
	if r == nil || (!known && !failed) {
		return
	}
	var adj []take
	for i, tk := range r.takes {
		d := r.budget[i] % dims
		switch {
		case failed:
			tk.cost = -tk.cost
		case d == dimRequests:
			continue
		default:
			tk.cost = float64(used) - tk.cost
			if tk.cost == 0 {
				continue
			}
		}
		adj = append(adj, tk)
	}
	if failed {
		r.f.stats.refunds.Add(1)
	}
	r.f.adjust(ctx, adj, r.remote)
}
