package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"

	"github.com/breakwater-dev/breakwater/cache/qdrant/qdranttest"
)

// qdrantConfig is a sidecar whose semantic tier is the Qdrant at {{QDRANT}}.
// Replicas sharing a collection must share the partition secret: it is read
// from the variable named by partition_secret_env (see qdrantEnv).
const qdrantConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
threshold = 0.93
partition_secret_env = "BW_TEST_PARTITION_SECRET"
[vector]
backend = "qdrant"
[vector.qdrant]
url = "{{QDRANT}}"
collection = "shared"
timeout = "300ms"
[retry]
max_attempts = 2
base_delay = "1ms"
max_delay = "5ms"
deadline = "10s"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary"}]
`

// qdrantEnv is the environment every replica sees: the same partition secret.
func qdrantEnv(name string) string {
	if name == "BW_TEST_PARTITION_SECRET" {
		return "shared-partition-secret-for-every-replica"
	}
	return ""
}

// startQdrantSidecar runs one replica against the Qdrant at addr, with its
// own data_dir (so nothing but Qdrant and the secret is shared), like start
// but with qdrantEnv as the environment.
func startQdrantSidecar(t *testing.T, addr, upstream string, extra ...string) *running {
	t.Helper()
	return startEnv(t, qdrantEnv, strings.ReplaceAll(qdrantConfig, "{{QDRANT}}", addr)+strings.Join(extra, ""), upstream)
}

// storedQueries counts the points of the shared collection whose payload
// query is one of qs, asking the fake Qdrant directly (not through a sidecar).
func storedQueries(t *testing.T, srv *qdranttest.Server, qs ...string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	c, err := qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	n, err := c.Count(ctx, &qdrant.CountPoints{
		CollectionName: "shared",
		Filter:         &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeywords("query", qs...)}},
		Exact:          qdrant.PtrOf(true),
	})
	if err != nil {
		return -1 // down or not yet created; callers poll
	}
	return int(n)
}

// tryChat is running.chat for goroutines other than the test's: it returns
// transport errors instead of failing the test.
func tryChat(r *running, question string, headers ...string) (int, string, error) {
	body := `{"model":"gpt-test","messages":[{"role":"user","content":` + jsonString(question) + `}]}`
	req, err := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// readyz returns /readyz's status code and decoded body.
func readyz(t *testing.T, r *running) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(r.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("/readyz body: %v", err)
	}
	return resp.StatusCode, body
}

// TestTwoSidecarsShareQdrant: two replicas, one Qdrant, one model. What
// replica 1 learnt is a hit on replica 2, by exact key and by paraphrase;
// another tenant on replica 2 still misses.
func TestTwoSidecarsShareQdrant(t *testing.T) {
	srv := qdranttest.Start(t)
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	r1 := startQdrantSidecar(t, srv.Addr(), us.URL, noSampling)
	r2 := startQdrantSidecar(t, srv.Addr(), us.URL, noSampling)

	const question = "How do I reset my password?"
	tenantA := []string{"Authorization", "Bearer tenant-A"}
	if status, h, body := r1.chat(t, question, tenantA...); status != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("replica 1, first ask: status %d, cache %q, want 200 miss: %s", status, h.Get("X-Breakwater-Cache"), body)
	}
	waitFor(t, "replica 1's answer to reach Qdrant", func() bool { return storedQueries(t, srv, question) == 1 })

	tests := []struct {
		name, question string
		headers        []string
		want           string
		similarity     bool
	}{
		{"same question, same tenant", question, tenantA, "hit-exact", false},
		{"paraphrase, same tenant", "How can I reset my password?", tenantA, "hit-semantic", true},
		{"paraphrase, other tenant", "How can I reset my password?", []string{"Authorization", "Bearer tenant-B"}, "miss", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := r2.chat(t, tt.question, tt.headers...)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			if got, want := h.Get("X-Breakwater-Cache"), tt.want; got != want {
				t.Fatalf("replica 2: X-Breakwater-Cache = %q, want %q", got, want)
			}
			if tt.want != "miss" && !strings.Contains(body, "answer to: "+question) {
				t.Errorf("replica 2 served %s, want replica 1's answer to %q", body, question)
			}
			if got, want := h.Get("X-Breakwater-Similarity") != "", tt.similarity; got != want {
				t.Errorf("X-Breakwater-Similarity present = %v (%q), want %v", got, h.Get("X-Breakwater-Similarity"), want)
			}
		})
	}
	if got, want := up.calls.Load(), int64(2); got != want {
		t.Errorf("upstream calls = %d, want %d (replica 1's miss, tenant B's miss)", got, want)
	}
}

// TestQdrantOutageDoesNotFailRequests stops Qdrant while a client keeps
// asking new and repeated questions: every request is answered, /readyz stays
// 200 and names the index as degraded; once Qdrant is back, new answers are
// written to it again and /readyz recovers.
func TestQdrantOutageDoesNotFailRequests(t *testing.T) {
	srv := qdranttest.Start(t)
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	r := startQdrantSidecar(t, srv.Addr(), us.URL)
	auth := []string{"Authorization", "Bearer tenant-A"}

	var (
		mu       sync.Mutex
		failures []string
		asked    int
	)
	// ask sends question n (new) and question n/2 (a repeat), recording any
	// non-200 answer.
	ask := func(phase string, n int) {
		for _, q := range []string{fmt.Sprintf("%s question number %d?", phase, n), fmt.Sprintf("%s question number %d?", phase, n/2)} {
			status, body, err := tryChat(r, q, auth...)
			mu.Lock()
			asked++
			if err != nil || status != http.StatusOK {
				failures = append(failures, fmt.Sprintf("%s: %d %s %v", q, status, body, err))
			}
			mu.Unlock()
		}
	}

	// Traffic flows through the whole run, Qdrant or not.
	ctx, stopTraffic := context.WithCancel(t.Context())
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		for n := 0; ctx.Err() == nil; n++ {
			ask("background", n)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { stopTraffic(); <-trafficDone }()

	const before = "Which river is the longest, asked before the outage?"
	ask(before, 0)
	waitFor(t, "the first answers to reach Qdrant", func() bool { return storedQueries(t, srv, before+" question number 0?") == 1 })
	if code, body := readyz(t, r); code != http.StatusOK || body["status"] != "ready" {
		t.Fatalf("/readyz before the outage = %d %v, want 200 ready", code, body)
	}

	srv.Stop()
	for n := range 6 {
		ask("during the outage", n)
	}
	waitFor(t, "/readyz to report the index degraded", func() bool {
		code, body := readyz(t, r)
		if code != http.StatusOK {
			t.Errorf("/readyz during the outage = %d %v, want 200", code, body)
			return true
		}
		deg, _ := body["degraded"].(map[string]any)
		return body["status"] == "degraded" && deg["index"] != nil
	})

	srv.Restart(t)
	const after = "Which mountain is the highest, asked after the restart"
	// The write-back is asynchronous and the first writes after the
	// restart may fail, so each poll asks a new question and looks for any
	// of them: on a busy machine a write can land polls after its question.
	n := 0
	var sent []string
	waitFor(t, "writes to resume after the restart", func() bool {
		n++
		ask(after, n)
		sent = append(sent, fmt.Sprintf("%s question number %d?", after, n))
		return storedQueries(t, srv, sent...) >= 1
	})
	waitFor(t, "/readyz to recover", func() bool {
		ask(after, 1000+n) // a new question: Health clears on the index's next success
		n++
		code, body := readyz(t, r)
		return code == http.StatusOK && body["status"] == "ready"
	})

	stopTraffic()
	<-trafficDone
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the run, want none:\n%s", len(failures), asked, strings.Join(failures, "\n"))
	}
	if asked < 20 {
		t.Errorf("only %d requests were sent; the run did not exercise the outage", asked)
	}
}

// TestQdrantSilentAtStartDoesNotHoldListening: a Qdrant address that accepts
// connections and never answers holds the collection check for the whole
// vector.qdrant.timeout (here a minute). The sidecar serves meanwhile:
// forwarding and the exact tier work, /readyz lists the index as loading,
// and shutdown does not wait for the check.
func TestQdrantSilentAtStartDoesNotHoldListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	up := &model{}
	us := httptest.NewServer(up)
	defer us.Close()
	cfg := strings.ReplaceAll(strings.ReplaceAll(qdrantConfig, "{{QDRANT}}", ln.Addr().String()), `timeout = "300ms"`, `timeout = "1m"`)
	r := launch(t, qdrantEnv, cfg, us.URL)

	auth := []string{"Authorization", "Bearer tenant-A"}
	if status, h, body := r.chat(t, "Which river is the longest?", auth...); status != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first request while Qdrant is silent: %d %q %s", status, h.Get("X-Breakwater-Cache"), body)
	}
	if _, h, _ := r.chat(t, "Which river is the longest?", auth...); h.Get("X-Breakwater-Cache") != "hit-exact" {
		t.Errorf("repeat = %q, want hit-exact", h.Get("X-Breakwater-Cache"))
	}
	code, body := readyz(t, r)
	loading, _ := body["loading"].([]any)
	if code != http.StatusOK || body["status"] != "degraded" || len(loading) != 1 || loading[0] != "index" {
		t.Errorf("/readyz while Qdrant is silent = %d %v, want 200 degraded with the index loading", code, body)
	}
	select {
	case <-r.app.IndexOpened():
		t.Fatal("the index open returned while Qdrant was silent")
	default:
	}
	stopped := make(chan struct{})
	go func() { r.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("shutdown waited for the Qdrant collection check")
	}
}
