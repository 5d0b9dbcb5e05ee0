package app

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/qdrant/go-client/qdrant"

	"github.com/breakwater-dev/breakwater/internal/cmd/loadgen"
)

// fleetConfig is one replica of a fleet sharing the Qdrant at {{QDRANT}},
// collection {{COLL}}: the same partition secret on every replica (from
// BW_FLEET_SECRET), two upstreams (the fallback answers while the primary is
// overloaded), admin from loopback for the flush.
const fleetConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
admin_allow_no_token = true
[cache]
data_dir = "{{DATA}}"
threshold = 0.93
partition_secret_env = "BW_FLEET_SECRET"
[cache.verify]
sample_rate = 0
[vector]
backend = "qdrant"
[vector.qdrant]
url = "{{QDRANT}}"
collection = "{{COLL}}"
timeout = "300ms"
[retry]
max_attempts = 2
base_delay = "1ms"
max_delay = "5ms"
deadline = "10s"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[upstreams]]
name = "fallback"
base_url = "{{UP2}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary", priority = 0}, {upstream = "fallback", priority = 1}]
`

const fleetSecret = "the-fleet-partition-secret-0123456789"

func fleetEnv(secret string) func(string) string {
	return func(name string) string {
		if name == "BW_FLEET_SECRET" {
			return secret
		}
		return ""
	}
}

// testQdrant is the Qdrant a fleet test shares: cmd/testqdrant built into
// the test's temporary directory and run as a process, or, with QDRANT_URL
// (or BREAKWATER_QDRANT_URL) set, that real Qdrant (gRPC host:port).
type testQdrant struct {
	addr string
	live bool
	bin  string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func startTestQdrant(t *testing.T) *testQdrant {
	t.Helper()
	for _, v := range []string{"QDRANT_URL", "BREAKWATER_QDRANT_URL"} {
		if u := os.Getenv(v); u != "" {
			return &testQdrant{addr: u, live: true}
		}
	}
	q := &testQdrant{bin: filepath.Join(t.TempDir(), "testqdrant")}
	build := exec.Command("go", "build", "-o", q.bin, "github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest/cmd/testqdrant")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testqdrant: %v\n%s", err, out)
	}
	q.start(t, "127.0.0.1:0")
	t.Cleanup(q.kill)
	return q
}

// start runs the process on addr and waits for it to listen.
func (q *testQdrant) start(t *testing.T, addr string) {
	t.Helper()
	cmd := exec.Command(q.bin, "-listen", addr, "-max-points", "20000")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start testqdrant: %v", err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		got, found := strings.CutPrefix(l, "testqdrant listening on ")
		if !ok || !found {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("testqdrant on %s did not start (first line %q)", addr, l)
		}
		q.mu.Lock()
		q.addr, q.cmd = got, cmd
		q.mu.Unlock()
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("testqdrant did not print its address within 20s")
	}
}

// kill ends the process at once, as SIGKILL does; its data goes with it.
func (q *testQdrant) kill() {
	q.mu.Lock()
	cmd := q.cmd
	q.cmd = nil
	q.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// restart starts the process again on the same address, retrying while the
// kernel holds the port.
func (q *testQdrant) restart(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		ln, err := net.Listen("tcp", q.addr)
		if err == nil {
			ln.Close()
			break
		}
		if i == 100 {
			t.Fatalf("port of %s not released: %v", q.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	q.start(t, q.addr)
}

// writesLost is what a replica's counters say it did not write to the
// index: dropped from the queue, failed, or skipped while it was opening.
func writesLost(r *running) uint64 {
	s := r.app.cache.Stats(context.Background())
	return s.QueueDrops + s.WriteFailures + s.OpeningSkips
}

// countQuery counts the points of coll whose payload query is q, asking
// Qdrant directly; -1 when it cannot.
func (q *testQdrant) countQuery(t *testing.T, coll, query string) int {
	return q.countQueries(t, coll, query)
}

// countQueries counts the points of coll whose payload query is one of qs.
func (q *testQdrant) countQueries(t *testing.T, coll string, qs ...string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(q.addr, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1, APIKey: os.Getenv("BREAKWATER_QDRANT_API_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	n, err := c.Count(ctx, &qdrant.CountPoints{
		CollectionName: coll,
		Filter:         &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeywords("query", qs...)}},
		Exact:          qdrant.PtrOf(true),
	})
	if err != nil {
		return -1
	}
	return int(n)
}

// fleetUpstream is a loopback model: chat completions answer "answer to:
// <question>", Responses creates answer with an id naming the upstream
// (responsesUpstream).
type fleetUpstream struct {
	chat      model
	resp      responsesUpstream
	followUps atomic.Int64 // Responses creates naming previous_response_id
}

func (u *fleetUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		u.chat.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if strings.Contains(string(body), `"previous_response_id"`) {
		u.followUps.Add(1)
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	u.resp.ServeHTTP(w, r)
}

func (u *fleetUpstream) setOverloaded(v bool) {
	u.resp.mu.Lock()
	u.resp.overloaded = v
	u.resp.mu.Unlock()
}

// fleet is three replicas behind a loopback balancer that, like a
// Kubernetes Service, sends each request to the next replica in rotation
// and tries the next one when a replica refuses the connection (it is
// restarting).
type fleet struct {
	t      *testing.T
	q      *testQdrant
	coll   string
	ups    [2]*httptest.Server
	mu     sync.Mutex
	reps   []*running
	next   atomic.Uint64
	client *http.Client
}

func (f *fleet) config() string {
	c := strings.ReplaceAll(fleetConfig, "{{QDRANT}}", f.q.addr)
	return strings.ReplaceAll(c, "{{COLL}}", f.coll)
}

// startReplica starts a replica that lives until the whole test ends (its
// cleanup is the parent test's, not a subtest's).
func (f *fleet) startReplica() *running {
	return startEnv(f.t, fleetEnv(fleetSecret), f.config(), f.ups[0].URL, f.ups[1].URL)
}

func (f *fleet) replica(i int) *running {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reps[i]
}

// ask sends a chat question to the fleet through the balancer.
func (f *fleet) ask(question, tenant string) (int, string, error) {
	body := `{"model":"gpt-test","messages":[{"role":"user","content":` + jsonString(question) + `}]}`
	var last error
	for range 6 {
		f.mu.Lock()
		r := f.reps[int(f.next.Add(1))%len(f.reps)]
		f.mu.Unlock()
		req, err := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tenant)
		resp, err := f.client.Do(req)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				last = err
				continue // not listening (restarting): the next replica
			}
			return 0, "", err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), err
	}
	return 0, "", fmt.Errorf("no replica took the connection: %w", last)
}

// load sends rate requests per second through the balancer until stop is
// closed, half of them repeats, and reports every answer that is not a 200
// carrying the answer to its question.
type loadResult struct {
	sent, bad atomic.Int64
	mu        sync.Mutex
	samples   []string
	answered  map[string]bool // questions answered with their answer
}

func (f *fleet) load(rate int, tag string, stop <-chan struct{}) (*loadResult, *sync.WaitGroup) {
	res := &loadResult{answered: map[string]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			q := fmt.Sprintf("%s question number %d?", tag, n/2) // each asked twice
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, body, err := f.ask(q, "tenant-load")
				res.sent.Add(1)
				if err == nil && status == http.StatusOK && strings.Contains(body, "answer to: "+q) {
					res.mu.Lock()
					res.answered[q] = true
					res.mu.Unlock()
				} else {
					res.bad.Add(1)
					res.mu.Lock()
					if len(res.samples) < 5 {
						res.samples = append(res.samples, fmt.Sprintf("%q: %d %v %.200s", q, status, err, body))
					}
					res.mu.Unlock()
				}
			}()
		}
	}()
	return res, &wg
}

// TestFleetSharesOneCache runs three replicas on one Qdrant (cmd/testqdrant
// as a process, or QDRANT_URL's) and checks that they behave as one cache.
func TestFleetSharesOneCache(t *testing.T) {
	q := startTestQdrant(t)
	f := &fleet{t: t, q: q, coll: "fleet_" + strings.ToLower(rand.Text()[:10]), client: &http.Client{
		Timeout: 30 * time.Second,
		// A connection per request, as a balancer that picks a replica per
		// request: a refused dial is the only way a stopped replica fails.
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
	primary, fallback := &fleetUpstream{resp: responsesUpstream{name: "p"}}, &fleetUpstream{resp: responsesUpstream{name: "f"}}
	f.ups[0], f.ups[1] = httptest.NewServer(primary), httptest.NewServer(fallback)
	t.Cleanup(f.ups[0].Close)
	t.Cleanup(f.ups[1].Close)
	for range 3 {
		f.reps = append(f.reps, f.startReplica())
	}
	a, b, c := f.replica(0), f.replica(1), f.replica(2)
	tenant := []string{"Authorization", "Bearer tenant-A"}
	const question = "How do I reset my password?"
	const paraphrase = "How can I reset my password?"

	t.Run("answered at A is hit-exact at B", func(t *testing.T) {
		if status, h, body := a.chat(t, question, tenant...); status != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
			t.Fatalf("A: %d %q %s, want 200 miss", status, h.Get("X-Breakwater-Cache"), body)
		}
		waitFor(t, "A's answer to reach Qdrant", func() bool { return q.countQuery(t, f.coll, question) == 1 })
		status, h, body := b.chat(t, question, tenant...)
		if status != http.StatusOK || h.Get("X-Breakwater-Cache") != "hit-exact" || !strings.Contains(body, "answer to: "+question) {
			t.Fatalf("B: %d %q %s, want 200 hit-exact with A's answer", status, h.Get("X-Breakwater-Cache"), body)
		}
	})
	t.Run("paraphrase at C is hit-semantic", func(t *testing.T) {
		status, h, body := c.chat(t, paraphrase, tenant...)
		if status != http.StatusOK || h.Get("X-Breakwater-Cache") != "hit-semantic" || !strings.Contains(body, "answer to: "+question) {
			t.Fatalf("C: %d %q %s, want 200 hit-semantic with A's answer", status, h.Get("X-Breakwater-Cache"), body)
		}
	})
	t.Run("another tenant misses on every replica", func(t *testing.T) {
		calls := primary.chat.calls.Load()
		for i, r := range []*running{a, b, c} {
			for j, qq := range []string{question, paraphrase} {
				// A tenant of its own per question: its first ask of
				// anything must reach the upstream.
				other := []string{"Authorization", fmt.Sprintf("Bearer tenant-other-%d-%d", i, j)}
				if _, h, _ := r.chat(t, qq, other...); h.Get("X-Breakwater-Cache") != "miss" {
					t.Errorf("replica %d, %q for another tenant: %q, want miss", i, qq, h.Get("X-Breakwater-Cache"))
				}
			}
		}
		if got := primary.chat.calls.Load() - calls; got != 6 {
			t.Errorf("the upstream answered %d of the other tenants' 6 questions, want all", got)
		}
	})
	t.Run("flush at A ends hits at B and C within 2s", func(t *testing.T) {
		// B and C both hold tenant A's answer in their own exact tier.
		for _, r := range []*running{b, c} {
			if _, h, _ := r.chat(t, question, tenant...); h.Get("X-Breakwater-Cache") != "hit-exact" {
				t.Fatalf("before the flush: %q, want hit-exact", h.Get("X-Breakwater-Cache"))
			}
		}
		req, _ := http.NewRequest(http.MethodDelete, a.url+"/admin/cache", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE /admin/cache at A: %d", resp.StatusCode)
		}
		flushed := time.Now()
		// no-store: a miss is not written back, so no replica can serve a
		// fresh answer that would look like the flushed one.
		probe := append([]string{"Cache-Control", "no-store"}, tenant...)
		for i, r := range []*running{b, c} {
			for {
				_, h, _ := r.chat(t, question, probe...)
				if h.Get("X-Breakwater-Cache") == "miss" {
					break
				}
				if time.Since(flushed) > 2*time.Second {
					t.Fatalf("replica %d still serves the flushed answer (%q) 2s after the flush", i+1, h.Get("X-Breakwater-Cache"))
				}
				time.Sleep(50 * time.Millisecond) // the poll's pace; the deadline above is the assertion
			}
		}
		t.Logf("B and C missed %s after the flush", time.Since(flushed).Round(time.Millisecond))
	})
	t.Run("Responses follow-up at B reaches the upstream that answered at A", func(t *testing.T) {
		clientAs := func(r *running, key string) *openai.Client {
			c := openai.NewClient(option.WithBaseURL(r.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
			return &c
		}
		client := func(r *running) *openai.Client { return clientAs(r, "sk-tenant-a") }
		primary.setOverloaded(true)
		first, err := client(a).Responses.New(t.Context(), responses.ResponseNewParams{
			Model: "gpt-test",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about lions.")},
		})
		primary.setOverloaded(false)
		if err != nil || !strings.HasPrefix(first.ID, "resp_f") {
			t.Fatalf("create at A with the primary overloaded: %v %+v, want the fallback's id", err, first)
		}
		next, err := client(b).Responses.New(t.Context(), responses.ResponseNewParams{
			Model:              "gpt-test",
			Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And about tigers?")},
			PreviousResponseID: openai.String(first.ID),
		})
		if err != nil || !strings.HasPrefix(next.ID, "resp_f") {
			t.Fatalf("follow-up at B: %v %+v, want an id from the fallback", err, next)
		}
		if p, fb := primary.followUps.Load(), fallback.followUps.Load(); p != 0 || fb != 1 {
			t.Errorf("follow-ups seen: primary %d, fallback %d; want 0 and 1", p, fb)
		}
		// Another tenant naming the id at B (which has just looked it up
		// for tenant A) is not told where it lives: its follow-up takes the
		// route's first upstream, as for an unknown id.
		if _, err := clientAs(b, "sk-tenant-b").Responses.New(t.Context(), responses.ResponseNewParams{
			Model:              "gpt-test",
			Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And about bears?")},
			PreviousResponseID: openai.String(first.ID),
		}); err != nil {
			t.Fatalf("another tenant's follow-up at B: %v", err)
		}
		if p, fb := primary.followUps.Load(), fallback.followUps.Load(); p != 1 || fb != 1 {
			t.Errorf("after another tenant's follow-up: primary %d, fallback %d; want 1 and 1 (the id's owner is tenant A's to know)", p, fb)
		}
	})
	t.Run("a replica configured differently refuses to run", func(t *testing.T) {
		cases := []struct {
			name, config, secret, want string
		}{
			{"another partition secret", f.config(), "another-partition-secret-9876543210", "partition secret"},
			{"another encoder", strings.Replace(f.config(), "[vector]", "[embed]\nprovider = \"openai\"\n[embed.openai]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"text-embedding-3-small\"\ndimensions = 512\n[vector]", 1), fleetSecret, "built by embedder"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := launch(t, fleetEnv(tc.secret), tc.config, f.ups[0].URL, f.ups[1].URL)
				select {
				case err := <-r.done:
					r.done <- nil // for the cleanup's stop
					if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "vector.qdrant.collection") || strings.Contains(err.Error(), "\n") {
						t.Fatalf("Serve returned %v; want one line naming the %s and the fix", err, tc.want)
					}
					t.Logf("refused: %v", err)
				case <-time.After(20 * time.Second):
					t.Fatal("the replica still runs 20s after start")
				}
			})
		}
	})
	t.Run("rolling restart under load", func(t *testing.T) {
		dur := 30 * time.Second
		if testing.Short() {
			dur = 6 * time.Second
		}
		stop := make(chan struct{})
		res, wg := f.load(20, "rolling", stop)
		start := time.Now()
		var lost uint64 // write-backs the stopped replicas counted as dropped or failed
		for i := range 3 {
			// Out of rotation, drained and stopped, then a new process in
			// its place: what a Deployment's rolling update does.
			f.mu.Lock()
			old := f.reps[i]
			f.reps = append(f.reps[:i:i], f.reps[i+1:]...)
			f.mu.Unlock()
			old.stop()
			lost += writesLost(old)
			fresh := f.startReplica()
			f.mu.Lock()
			f.reps = append(f.reps[:i:i], append([]*running{fresh}, f.reps[i:]...)...)
			f.mu.Unlock()
			time.Sleep(dur / 4) // load runs between restarts
		}
		if rest := dur - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
		close(stop)
		wg.Wait()
		for i := range 3 {
			select {
			case err := <-f.replica(i).done:
				t.Fatalf("replica %d stopped during the rolling restart: %v", i, err)
			default:
			}
		}
		if res.bad.Load() != 0 || res.sent.Load() < int64(dur.Seconds()*10) {
			t.Errorf("%d of %d requests failed or lost their answer during the rolling restart, want 0: %v", res.bad.Load(), res.sent.Load(), res.samples)
		}
		t.Logf("rolling restart: %d requests, %d failed", res.sent.Load(), res.bad.Load())
		// Every question answered is in Qdrant, but for the write-backs the
		// replicas counted as dropped or failed.
		var qs []string
		for q := range res.answered {
			qs = append(qs, q)
		}
		var stored int
		var running uint64 // write-backs the running replicas counted lost
		waitFor(t, "the answered questions' write-backs to land", func() bool {
			running = 0
			for i := range 3 {
				running += writesLost(f.replica(i))
			}
			// -1: the count failed; ask again rather than read it as a
			// number.
			stored = q.countQueries(t, f.coll, qs...)
			return stored >= 0 && stored+int(lost+running) >= len(qs)
		})
		t.Logf("rolling restart: %d questions answered, %d stored in Qdrant, %d write-backs counted lost by stopped replicas, %d by running ones", len(qs), stored, lost, running)
		// A write-back counted lost excuses its missing entry, but a
		// rolling restart drains each replica and flushes its queue (and a
		// new replica takes requests once its index is open): losing more
		// than a tenth of them is a failure, not an excuse.
		if total := lost + running; len(qs) == 0 || total > uint64(len(qs))/10 {
			t.Errorf("%d of %d write-backs were counted lost during the rolling restart, want at most a tenth", total, len(qs))
		}
	})
	t.Run("Qdrant killed for 10s under load", func(t *testing.T) {
		if q.live {
			t.Skip("QDRANT_URL is a Qdrant this test does not own: it cannot kill it")
		}
		down := 10 * time.Second
		if testing.Short() {
			down = 3 * time.Second
		}
		stop := make(chan struct{})
		res, wg := f.load(20, "outage", stop)
		q.kill()
		killed := time.Now()
		waitFor(t, "every replica's /readyz to report the index degraded", func() bool {
			for i := range 3 {
				code, body := readyz(t, f.replica(i))
				deg, _ := body["degraded"].(map[string]any)
				cause, _ := deg["index"].(string)
				if code != http.StatusOK || body["status"] != "degraded" || cause == "" {
					return false
				}
			}
			return true
		})
		_, body := readyz(t, f.replica(0))
		t.Logf("/readyz during the outage: %v", body)
		if rest := down - time.Since(killed); rest > 0 {
			time.Sleep(rest)
		}
		q.restart(t)
		back := time.Now()
		for i := range 3 {
			for {
				code, body := readyz(t, f.replica(i))
				if code == http.StatusOK && body["status"] == "ready" {
					break
				}
				if time.Since(back) > 5*time.Second {
					t.Fatalf("replica %d not ready 5s after Qdrant returned: %v", i, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		t.Logf("every replica ready %s after Qdrant returned", time.Since(back).Round(time.Millisecond))
		close(stop)
		wg.Wait()
		if res.bad.Load() != 0 {
			t.Errorf("%d of %d requests failed or lost their answer with Qdrant down, want 0: %v", res.bad.Load(), res.sent.Load(), res.samples)
		}
	})
}

// TestFleetHitRate runs the demo's workload (loadgen.Builtin, 50% repeats,
// 20% paraphrases, Zipf 1.1, seed 1: `breakwater demo -workload builtin`)
// at 40 requests/s through one replica, then through three fresh replicas
// behind a round-robin balancer, each on its own collection of one test
// Qdrant, and compares the share of answers served from the cache: a fleet
// sharing Qdrant must be within 5 points of a single replica.
func TestFleetHitRate(t *testing.T) {
	q := startTestQdrant(t)
	n := 400
	if testing.Short() {
		n = 200
	}
	run := func(replicas int) *loadgen.Summary {
		f := &fleet{t: t, q: q, coll: "hitrate_" + strings.ToLower(rand.Text()[:10])}
		up := &fleetUpstream{}
		f.ups[0] = httptest.NewServer(up)
		f.ups[1] = f.ups[0]
		t.Cleanup(f.ups[0].Close)
		var urls []*url.URL
		for range replicas {
			r := f.startReplica()
			u, _ := url.Parse(r.url)
			urls = append(urls, u)
		}
		var next atomic.Uint64
		lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(urls[int(next.Add(1))%len(urls)])
		}})
		t.Cleanup(lb.Close)
		sum, err := loadgen.Bench(t.Context(), loadgen.Config{
			URL:      lb.URL,
			Rate:     40,
			Requests: n,
			Items:    loadgen.Builtin(1),
			Mix:      loadgen.Mix{Repeat: 0.5, Paraphrase: 0.2, Zipf: 1.1, Seed: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.OK != sum.Sent || sum.Sent != n {
			t.Fatalf("%d replicas: %d of %d requests sent, %d OK; want all", replicas, sum.Sent, n, sum.OK)
		}
		return sum
	}
	one, three := run(1), run(3)
	rate := func(s *loadgen.Summary) float64 { return 100 * float64(s.UpstreamSaved) / float64(s.Sent) }
	t.Logf("| replicas | requests | hit-exact | hit-semantic | served from cache |")
	t.Logf("|---|---|---|---|---|")
	for _, r := range []struct {
		n int
		s *loadgen.Summary
	}{{1, one}, {3, three}} {
		t.Logf("| %d | %d | %d | %d | %.1f %% |", r.n, r.s.Sent, r.s.ByOutcome["hit-exact"].Count, r.s.ByOutcome["hit-semantic"].Count, rate(r.s))
	}
	if d := rate(one) - rate(three); d > 5 || d < -5 {
		t.Errorf("three replicas served %.1f %% from the cache, one %.1f %%: want within 5 points", rate(three), rate(one))
	}
}
