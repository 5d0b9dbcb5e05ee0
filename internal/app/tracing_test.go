package app

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes every
// export (protobuf, the exporter's default) and keeps the spans.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*tracepb.Span
	res []*commonpb.KeyValue // resource attributes
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(io.LimitReader(body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		o.mu.Lock()
		for _, rs := range req.ResourceSpans {
			o.res = append(o.res, rs.GetResource().GetAttributes()...)
			for _, ss := range rs.ScopeSpans {
				o.got = append(o.got, ss.Spans...)
			}
		}
		o.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) spans() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.got...)
}

func attrOf(s *tracepb.Span, key string) (*commonpb.AnyValue, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

func attrString(s *tracepb.Span, key string) string {
	v, _ := attrOf(s, key)
	return v.GetStringValue()
}

func attrInt(s *tracepb.Span, key string) int64 {
	v, _ := attrOf(s, key)
	return v.GetIntValue()
}

// tracedUpstream answers as model does, remembers each request's
// traceparent, and can hold requests (gate) or refuse them (refuse).
type tracedUpstream struct {
	model
	mu      sync.Mutex
	parents []string
	gate    chan struct{} // requests asking about "hold" wait on it
	refuse  map[string]bool
}

func (u *tracedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.parents = append(u.parents, r.Header.Get("Traceparent"))
	u.mu.Unlock()
	raw, _ := io.ReadAll(r.Body)
	if strings.Contains(string(raw), "hold") && u.gate != nil {
		<-u.gate
	}
	for q := range u.refuse {
		if strings.Contains(string(raw), q) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"message":"model is at capacity","type":"rate_limit_error","code":"rate_limited"}}`)
			return
		}
	}
	r.Body = io.NopCloser(strings.NewReader(string(raw)))
	u.model.ServeHTTP(w, r)
}

func (u *tracedUpstream) traceparents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parents...)
}

const tracedConfig = `
default_upstream = "primary"
[server]
listen = "127.0.0.1:0"
[cache]
data_dir = "{{DATA}}"
[cache.verify]
sample_rate = 0
[retry]
max_attempts = 1
base_delay = "1ms"
max_delay = "5ms"
deadline = "20s"
[tracing]
endpoint = "{{UP3}}"
[[upstreams]]
name = "primary"
base_url = "{{UP1}}/v1"
max_concurrency = 1
[[upstreams]]
name = "fallback"
base_url = "{{UP2}}/v1"
[[models]]
name = "gpt-test"
targets = [{upstream = "primary", model = "gpt-big", priority = 0}, {upstream = "fallback", model = "gpt-small", priority = 1}]
`

// TestTraceOfQueuedRetriedFallback: a request that queued behind another
// at its first target, was refused there with 429 and was then answered by
// the fallback arrives at an OTLP receiver as one trace, continuing the
// client's traceparent: a server span, a queue span, and two attempt
// spans following the GenAI conventions; both upstreams saw the trace id.
func TestTraceOfQueuedRetriedFallback(t *testing.T) {
	primary := &tracedUpstream{gate: make(chan struct{}), refuse: map[string]bool{"traced": true}}
	fallback := &tracedUpstream{}
	up1, up2 := httptest.NewServer(primary), httptest.NewServer(fallback)
	defer up1.Close()
	defer up2.Close()
	otlp := newOTLPReceiver(t)
	r := start(t, tracedConfig, up1.URL, up2.URL, otlp.srv.URL)

	// The blocker takes primary's only slot and holds it.
	blocked := make(chan int, 1)
	go func() {
		code, _, _ := r.chat(t, "please hold this slot")
		blocked <- code
	}()
	waitFor(t, "the blocker at the primary", func() bool { return len(primary.traceparents()) == 1 })

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const clientSpan = "00f067aa0ba902b7"
	done := make(chan http.Header, 1)
	go func() {
		_, h, _ := r.chat(t, "a traced question", "Traceparent", "00-"+traceID+"-"+clientSpan+"-01")
		done <- h
	}()
	waitFor(t, "the traced request to queue", func() bool {
		return strings.Contains(r.get(t, "/stats"), `"queued":1`)
	})
	close(primary.gate)
	h := <-done
	if code := <-blocked; code != http.StatusOK {
		t.Fatalf("blocker: %d", code)
	}
	if got := h.Get("X-Breakwater-Upstream"); !strings.Contains(got, "fallback") {
		t.Fatalf("answered by %q, want the fallback", got)
	}
	r.stop() // shutdown flushes the batch exporter

	var server, queue *tracepb.Span
	lookup := map[string]*tracepb.Span{}
	var attempts []*tracepb.Span
	for _, s := range otlp.spans() {
		if hex.EncodeToString(s.TraceId) != traceID {
			continue
		}
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			if server != nil {
				t.Errorf("two server spans in the trace: %s and %s", server.Name, s.Name)
			}
			server = s
		case s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			attempts = append(attempts, s)
		case strings.HasPrefix(s.Name, "queue "):
			if strings.Contains(s.Name, "primary") {
				queue = s
			}
		case s.Name == "embed" || s.Name == "search":
			lookup[s.Name] = s
		}
	}
	if server == nil {
		t.Fatalf("no server span in trace %s; got %d spans", traceID, len(otlp.spans()))
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != clientSpan {
		t.Errorf("server span's parent = %s, want the client's %s", got, clientSpan)
	}
	if server.Name != "POST /v1/chat/completions" || attrString(server, "breakwater.cache.outcome") != "miss" ||
		attrInt(server, "http.response.status_code") != 200 {
		t.Errorf("server span %q: %v", server.Name, server.Attributes)
	}
	for _, name := range []string{"embed", "search"} {
		if s := lookup[name]; s == nil || string(s.ParentSpanId) != string(server.SpanId) {
			t.Errorf("no %s span of the lookup under the server span", name)
		}
	}
	if queue == nil {
		t.Fatal("no queue span for the wait at the primary")
	}
	if d := queue.EndTimeUnixNano - queue.StartTimeUnixNano; d == 0 || string(queue.ParentSpanId) != string(server.SpanId) {
		t.Errorf("queue span: %d ns, parent %x, want a wait under the server span %x", d, queue.ParentSpanId, server.SpanId)
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2: %v", len(attempts), attempts)
	}
	refused, answered := attempts[0], attempts[1]
	if refused.StartTimeUnixNano > answered.StartTimeUnixNano {
		refused, answered = answered, refused
	}
	for _, a := range attempts {
		if string(a.ParentSpanId) != string(server.SpanId) {
			t.Errorf("attempt %q is not a child of the server span", a.Name)
		}
		if attrString(a, "gen_ai.operation.name") != "chat" || attrString(a, "gen_ai.provider.name") != "openai" {
			t.Errorf("attempt %q: %v", a.Name, a.Attributes)
		}
	}
	if refused.Name != "chat gpt-big" || attrString(refused, "gen_ai.request.model") != "gpt-big" ||
		attrInt(refused, "http.response.status_code") != 429 || attrString(refused, "error.type") != "429" {
		t.Errorf("refused attempt %q: %v", refused.Name, refused.Attributes)
	}
	if answered.Name != "chat gpt-small" || attrString(answered, "gen_ai.request.model") != "gpt-small" ||
		attrString(answered, "gen_ai.response.model") != "gpt-small" ||
		attrInt(answered, "gen_ai.usage.input_tokens") != 3 || attrInt(answered, "gen_ai.usage.output_tokens") != 3 ||
		attrInt(answered, "http.response.status_code") != 200 {
		t.Errorf("answered attempt %q: %v", answered.Name, answered.Attributes)
	}
	if _, ok := attrOf(answered, "error.type"); ok {
		t.Errorf("the answered attempt has an error.type: %v", answered.Attributes)
	}
	// Each upstream saw the client's trace id, with its attempt as parent.
	wantParent := map[string]string{"primary": hex.EncodeToString(refused.SpanId), "fallback": hex.EncodeToString(answered.SpanId)}
	for name, u := range map[string]*tracedUpstream{"primary": primary, "fallback": fallback} {
		tp := u.traceparents()
		last := tp[len(tp)-1]
		if want := "00-" + traceID + "-" + wantParent[name] + "-01"; last != want {
			t.Errorf("%s saw traceparent %q, want %q", name, last, want)
		}
	}
}

// TestSpansCarryNoSecrets: no span attribute, name or event of a miss, an
// exact hit and a streamed hit holds the prompt, the answer or the
// client's key.
func TestSpansCarryNoSecrets(t *testing.T) {
	up := &tracedUpstream{}
	u := httptest.NewServer(up)
	defer u.Close()
	otlp := newOTLPReceiver(t)
	r := start(t, tracedConfig, u.URL, u.URL, otlp.srv.URL)
	const key = "sk-live-7f3a9c2e5b1d"
	const prompt = "my mother's maiden name is Quetzalcoatl"
	for _, want := range []string{"miss", "hit-exact"} {
		code, h, body := r.chat(t, prompt, "Authorization", "Bearer "+key)
		if code != 200 || h.Get("X-Breakwater-Cache") != want || !strings.Contains(body, "Quetzalcoatl") {
			t.Fatalf("%d, X-Breakwater-Cache %q, want 200 and %s: %s", code, h.Get("X-Breakwater-Cache"), want, body)
		}
	}
	// The same question streamed: the stored answer replayed as SSE.
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":`+jsonString(prompt)+`}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	streamed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Breakwater-Cache") != "hit-exact" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(streamed), "[DONE]") {
		t.Fatalf("streamed repeat: %d, X-Breakwater-Cache %q, Content-Type %q, want 200, hit-exact and a replayed stream: %s",
			resp.StatusCode, resp.Header.Get("X-Breakwater-Cache"), resp.Header.Get("Content-Type"), streamed)
	}
	r.stop()
	spans := otlp.spans()
	var outcomes []string
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER {
			outcomes = append(outcomes, attrString(s, "breakwater.cache.outcome"))
		}
	}
	slices.Sort(outcomes)
	if got, want := strings.Join(outcomes, ","), "hit-exact,hit-exact,miss"; got != want {
		t.Fatalf("server spans' outcomes %s, want %s: the miss, the exact hit and the streamed hit (%d spans)", got, want, len(spans))
	}
	secrets := []string{key, "Quetzalcoatl", "answer to:"}
	check := func(where string, kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			text := kv.Key + "=" + kv.Value.String()
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("%s attribute %s holds %q", where, text, s)
				}
			}
		}
	}
	for _, s := range spans {
		for _, sec := range secrets {
			if strings.Contains(s.Name, sec) {
				t.Errorf("span name %q holds %q", s.Name, sec)
			}
		}
		check("span "+s.Name, s.Attributes)
		for _, ev := range s.Events {
			check("event "+ev.Name, ev.Attributes)
		}
	}
	otlp.mu.Lock()
	check("resource", otlp.res)
	otlp.mu.Unlock()
}

// TestStreamAttemptSpanHasUsage: a streamed answer's usage (the last
// chunk's, with stream_options.include_usage) lands on its attempt span.
func TestStreamAttemptSpanHasUsage(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-small-2026","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-small-2026","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-small-2026","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":34,"total_tokens":55}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", ev)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	otlp := newOTLPReceiver(t)
	r := start(t, tracedConfig, up.URL, up.URL, otlp.srv.URL)
	body := `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"stream please"}]}`
	resp, err := http.Post(r.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
		t.Fatalf("%d: %s", resp.StatusCode, b)
	}
	r.stop()
	var attempts []*tracepb.Span
	for _, s := range otlp.spans() {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans, want 1", len(attempts))
	}
	a := attempts[0]
	if attrInt(a, "gen_ai.usage.input_tokens") != 21 || attrInt(a, "gen_ai.usage.output_tokens") != 34 ||
		attrString(a, "gen_ai.response.model") != "gpt-small-2026" || attrInt(a, "http.response.status_code") != 200 {
		t.Errorf("stream attempt %q: %v", a.Name, a.Attributes)
	}
}

// TestJudgeAttemptSpanIsMarked: the default judge's call to the model is a
// GenAI client span like any attempt, marked breakwater.judge; the
// request's own attempt is not.
func TestJudgeAttemptSpanIsMarked(t *testing.T) {
	up := httptest.NewServer(&model{})
	defer up.Close()
	otlp := newOTLPReceiver(t)
	r := start(t, tracedConfig, up.URL, up.URL, otlp.srv.URL)
	if _, h, _ := r.chat(t, "How do I reset my password?"); h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("first question: %q, want miss", h.Get("X-Breakwater-Cache"))
	}
	waitFor(t, "the answer to be indexed", func() bool { return strings.Contains(r.get(t, "/stats"), `"semantic":1`) })
	if _, h, _ := r.chat(t, "How can I reset my password?"); h.Get("X-Breakwater-Cache") != "hit-semantic" {
		t.Fatalf("paraphrase: %q, want hit-semantic after the judge", h.Get("X-Breakwater-Cache"))
	}
	r.stop()
	var judged, plain int
	for _, s := range otlp.spans() {
		if s.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			continue
		}
		if v, ok := attrOf(s, "breakwater.judge"); ok && v.GetBoolValue() {
			judged++
			if s.Name != "chat gpt-big" || attrString(s, "gen_ai.provider.name") != "openai" {
				t.Errorf("judge span %q: %v", s.Name, s.Attributes)
			}
			continue
		}
		plain++
	}
	if judged != 1 || plain != 1 {
		t.Errorf("client spans: %d marked as the judge's, %d not; want 1 and 1", judged, plain)
	}
}
