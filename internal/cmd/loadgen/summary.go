package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// Outcome labels. OutcomeDirect marks answers without X-Breakwater-Cache
// (a target that is not Breakwater).
const (
	OutcomeHitExact    = "hit-exact"
	OutcomeHitSemantic = "hit-semantic"
	OutcomeStale       = "stale"
	OutcomeMiss        = "miss"
	OutcomeBypass      = "bypass"
	OutcomeDirect      = "direct"
)

// Latency is a set of percentiles. It marshals to JSON in milliseconds.
type Latency struct {
	P50, P90, P99, Max time.Duration
}

// MarshalJSON writes {"p50_ms", "p90_ms", "p99_ms", "max_ms"}.
func (l Latency) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.Marshal(map[string]float64{"p50_ms": ms(l.P50), "p90_ms": ms(l.P90), "p99_ms": ms(l.P99), "max_ms": ms(l.Max)})
}

// Group is the count and latency of one slice of the results.
type Group struct {
	Count   int     `json:"count"`
	OK      int     `json:"ok"`
	Latency Latency `json:"latency"`
}

// Summary is what a bench run measured.
type Summary struct {
	URL string `json:"url"`
	// Scheduled requests; Sent = Scheduled − Dropped (minus any left when
	// the context ended).
	Scheduled int `json:"scheduled"`
	Sent      int `json:"sent"`
	// Dropped requests were due while MaxInFlight were in flight.
	Dropped int `json:"dropped"`
	// Late requests were sent more than one interval behind schedule.
	Late int `json:"late"`
	// TargetRate is the configured rate; AchievedRate is sent requests per
	// second over the sending span.
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// Elapsed is the whole run, the tail of slow answers included.
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_s"`
	// OK are 2xx answers; RateLimited 429; ServerErrors 5xx; ClientErrors
	// other 4xx; Errors transport failures and timeouts.
	OK          int `json:"ok"`
	RateLimited int `json:"rate_limited"`
	// Overloaded are 529s (Anthropic's overloaded_error), counted apart
	// from ServerErrors.
	Overloaded int `json:"overloaded"`
	// StreamErrors are streams that answered 200 and then broke off: an
	// error event or no end marker. They do not count as OK.
	StreamErrors int `json:"stream_errors"`
	ServerErrors int `json:"server_errors"`
	ClientErrors int `json:"client_errors"`
	Errors       int `json:"errors"`
	// Latency is over successful (2xx) answers only: fast refusals would
	// otherwise flatter a target that sheds load.
	Latency Latency `json:"latency"`
	// ByOutcome groups answers by X-Breakwater-Cache (OutcomeDirect when
	// absent); its latency is over successful answers.
	ByOutcome map[string]Group `json:"by_outcome"`
	// ByKind groups requests by what the workload drew (new, repeat,
	// paraphrase).
	ByKind map[string]Group `json:"by_kind"`
	// UpstreamSaved counts answers served without an upstream call
	// (hit-exact, hit-semantic, stale).
	UpstreamSaved int `json:"upstream_saved"`
}

func summarise(rs []result, cfg Config, scheduled, dropped, late int, span, elapsed time.Duration) *Summary {
	s := &Summary{
		URL: cfg.URL, Scheduled: scheduled, Sent: len(rs), Dropped: dropped, Late: late,
		TargetRate: cfg.Rate, Elapsed: elapsed, ElapsedSeconds: elapsed.Seconds(),
		ByOutcome: map[string]Group{}, ByKind: map[string]Group{},
	}
	if span > 0 && len(rs) > 1 {
		// n requests span n−1 intervals.
		s.AchievedRate = float64(len(rs)-1) / span.Seconds()
	}
	var okLat []time.Duration
	outLat := map[string][]time.Duration{}
	kindLat := map[string][]time.Duration{}
	for _, r := range rs {
		ok := r.status >= 200 && r.status < 300 && !r.cut
		switch {
		case r.cut:
			s.StreamErrors++
		case r.status == 0:
			s.Errors++
		case ok:
			s.OK++
		case r.status == 429:
			s.RateLimited++
		case r.status == 529:
			s.Overloaded++
		case r.status >= 500:
			s.ServerErrors++
		default:
			s.ClientErrors++
		}
		out := r.outcome
		if out == "" {
			out = OutcomeDirect
		}
		if r.status == 0 {
			out = "error"
		}
		og, kg := s.ByOutcome[out], s.ByKind[r.kind]
		og.Count++
		kg.Count++
		if ok {
			og.OK++
			kg.OK++
			okLat = append(okLat, r.latency)
			outLat[out] = append(outLat[out], r.latency)
			kindLat[r.kind] = append(kindLat[r.kind], r.latency)
			if out == OutcomeHitExact || out == OutcomeHitSemantic || out == OutcomeStale {
				s.UpstreamSaved++
			}
		}
		s.ByOutcome[out], s.ByKind[r.kind] = og, kg
	}
	s.Latency = percentiles(okLat)
	for k, g := range s.ByOutcome {
		g.Latency = percentiles(outLat[k])
		s.ByOutcome[k] = g
	}
	for k, g := range s.ByKind {
		g.Latency = percentiles(kindLat[k])
		s.ByKind[k] = g
	}
	return s
}

// percentiles uses the nearest-rank method.
func percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(d))+0.999999) - 1
		return d[min(max(i, 0), len(d)-1)]
	}
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: d[len(d)-1]}
}

// WriteText prints s for a person.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "target        %s\n", s.URL)
	fmt.Fprintf(w, "requests      %d scheduled, %d sent, %d dropped (max in flight), %d late\n", s.Scheduled, s.Sent, s.Dropped, s.Late)
	fmt.Fprintf(w, "rate          %.1f/s achieved (target %.1f/s), run %s\n", s.AchievedRate, s.TargetRate, s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "status        200: %d   429: %d   5xx: %d   4xx: %d   errors: %d\n", s.OK, s.RateLimited, s.ServerErrors, s.ClientErrors, s.Errors)
	fmt.Fprintf(w, "latency (ok)  p50 %s   p90 %s   p99 %s   max %s\n", ms(s.Latency.P50), ms(s.Latency.P90), ms(s.Latency.P99), ms(s.Latency.Max))
	fmt.Fprintf(w, "upstream      %d calls saved by the cache (%.0f%% of answers)\n", s.UpstreamSaved, pct(s.UpstreamSaved, s.OK))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\noutcome\tcount\tok\tp50\tp90\tp99\t")
	for _, k := range sortedKeys(s.ByOutcome, []string{OutcomeHitExact, OutcomeHitSemantic, OutcomeStale, OutcomeMiss, OutcomeBypass, OutcomeDirect, "error"}) {
		g := s.ByOutcome[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t\n", k, g.Count, g.OK, ms(g.Latency.P50), ms(g.Latency.P90), ms(g.Latency.P99))
	}
	fmt.Fprintln(tw, "\nworkload\tcount\tok\tp50\tp90\tp99\t")
	for _, k := range sortedKeys(s.ByKind, []string{KindNew, KindRepeat, KindParaphrase}) {
		g := s.ByKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t\n", k, g.Count, g.OK, ms(g.Latency.P50), ms(g.Latency.P90), ms(g.Latency.P99))
	}
	tw.Flush()
}

func sortedKeys(m map[string]Group, order []string) []string {
	var keys []string
	for _, k := range order {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	for k := range m {
		if !slices.Contains(order, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	default:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// progress redraws one line on w every 200ms.
type progress struct {
	w        io.Writer
	total    int
	done     *atomic.Int64
	inflight *atomic.Int64
	start    time.Time
	quit     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func newProgress(w io.Writer, total int, done, inflight *atomic.Int64) *progress {
	p := &progress{w: w, total: total, done: done, inflight: inflight, start: time.Now(), quit: make(chan struct{})}
	if w == nil {
		return p
	}
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw()
			case <-p.quit:
				p.draw()
				fmt.Fprintln(p.w)
				return
			}
		}
	})
	return p
}

func (p *progress) draw() {
	const width = 30
	d := int(p.done.Load())
	fill := width * d / max(p.total, 1)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	fmt.Fprintf(p.w, "\r[%s] %3d%% %d/%d in flight %-4d %s ", bar, 100*d/max(p.total, 1), d, p.total, p.inflight.Load(), time.Since(p.start).Round(100*time.Millisecond))
}

func (p *progress) stop() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}
