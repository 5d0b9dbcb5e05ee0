package gemini

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// geminiFormat is the Gemini API's generateContent
// (https://ai.google.dev/api/generate-content). The model and the method are
// in the path, not the body, so one value is built per request.
type geminiFormat struct {
	model string // from the path, without "models/"
	// version is the API version the client called: "/v1beta" (the SDKs'
	// default), "/v1" or "/v1alpha".
	version string
	stream  bool       // streamGenerateContent?alt=sse
	query   url.Values // the client's query, without its API key
	// storeMaxTokens stores answers cut by maxOutputTokens (finishReason
	// MAX_TOKENS) as well as those that stopped by themselves.
	storeMaxTokens bool
}

// geminiErrors is the wire.Format of a Gemini route before its request is
// parsed: only its error shape is used.
var geminiErrors = geminiFormat{}.format()

// geminiRequest holds one request's Format and what its hooks read, in one
// allocation.
type geminiRequest struct {
	f     geminiFormat
	wf    wire.Format
	judge wire.Judge
}

// format is the wire.Format of the request f describes: the shared
// behaviour (geminiShared), with the key, the upstream request and the judge
// read from the path.
func (f geminiFormat) format() *wire.Format {
	r := &geminiRequest{f: f}
	r.wf = geminiShared[0]
	if f.storeMaxTokens {
		r.wf = geminiShared[1]
	}
	r.wf.Key = r.f.key
	r.wf.ShapeRequest = r.f.shapeRequest
	r.wf.PathModel, r.wf.PathStream = f.model, f.stream
	r.judge = wire.Judge{Request: r.f.judgeRequest, Headers: judgeHeaders}
	r.wf.Judge = &r.judge
	return &r.wf
}

// geminiShared is what every request's Format shares, without and with
// storeMaxTokens.
var geminiShared = [2]wire.Format{baseFormat(false), baseFormat(true)}

func baseFormat(storeMaxTokens bool) wire.Format {
	return wire.Format{
		Endpoint: GeminiEndpoint,
		Finished: geminiFormat{storeMaxTokens: storeMaxTokens}.Finished,
		Usage:    geminiUsage.Read,
		Cost:     requestCost,
		// AnswerText joins the first candidate's text parts, without
		// thought parts.
		AnswerText:   answerText,
		Replay:       wire.ReplayStored(geminiReplay),
		NewAssembler: func() wire.StreamAssembler { return newGeminiStream(storeMaxTokens) },
		Error: func(status int, code, message string) (int, []byte) {
			return status, geminiErrorBody(status, code, message)
		},
		StreamError: streamError,
		Resume:      geminiResume,
		// generateContent, by Gemini.
		GenAIOperation: "generate_content",
		GenAIProvider:  "gcp.gemini",
		// Fresh: nil, the stored body is served as it is: a Gemini answer
		// carries no creation time, and its responseId is only
		// informational (no later request refers to it).
	}
}

func (f *geminiFormat) key(partition string, _ http.Header, body []byte, group func(string) string) (wire.Key, error) {
	return GeminiKey(partition, f.model, f.stream, body, group)
}

// Finished reads a non-stream body as a stream of one event.
func (f geminiFormat) Finished(body []byte) bool {
	a := newGeminiStream(f.storeMaxTokens)
	return a.add(body) == nil && a.Complete()
}

// ForModel sends a fallback target's model in the path, where the Gemini API
// reads it, and in the body's optional "model" field when the client set one.
func (f geminiFormat) ForModel(_ string, body []byte) func(string) (string, []byte) {
	return func(model string) (string, []byte) {
		return f.upstreamPath(model), geminiBodyForModel(body, model)
	}
}

// streamError ends a cut stream with a data event holding an error object:
// the genai SDKs raise a data event whose object has "error" as an APIError
// (google.golang.org/genai iterateResponseStream; @google/genai likewise).
func streamError(err error) []byte {
	return wire.EventBytes("", geminiErrorBody(http.StatusServiceUnavailable, "stream_interrupted", wire.InterruptedMessage(err)))
}

func answerText(body []byte) string {
	var r struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text    string `json:"text"`
					Thought bool   `json:"thought"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Candidates) == 0 {
		return ""
	}
	var b strings.Builder
	for _, p := range r.Candidates[0].Content.Parts {
		if !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// shapeRequest points the upstream request at the model's path, reads the
// upstream's refusals the Gemini way, and sends a fallback target's model
// in the path (ForModel).
func (f *geminiFormat) shapeRequest(r *upstream.Request) {
	r.Path = f.upstreamPath(f.model)
	r.Classify = classifyGemini
	r.ForModel = f.ForModel("", r.Body)
}

// geminiUsage: usageMetadata.promptTokenCount (+ toolUsePromptTokenCount)
// in, candidatesTokenCount + thoughtsTokenCount out: thinking tokens are
// billed as output and not counted in candidatesTokenCount.
var geminiUsage = wire.UsageFields{Field: "usageMetadata",
	Input:  []string{"promptTokenCount", "toolUsePromptTokenCount"},
	Output: []string{"candidatesTokenCount", "thoughtsTokenCount"}}

// upstreamPath is the path sent upstream for model. It starts with the
// version the client called, which the caller replaces with the upstream's
// base URL when that holds a version (e.g.
// https://generativelanguage.googleapis.com/v1beta: the upstream's version
// wins, as for every other API) and keeps after a bare host: the API answers
// 404 to a path without a version.
func (f geminiFormat) upstreamPath(model string) string {
	method := "generateContent"
	if f.stream {
		method = "streamGenerateContent"
	}
	p := geminiVersionOr(f.version) + "/models/" + url.PathEscape(model) + ":" + method
	if q := f.query.Encode(); q != "" {
		p += "?" + q
	}
	return p
}

// geminiBodyForModel rewrites the body's top-level "model" ("models/<name>")
// when the client sent one; the API accepts a body without it.
func geminiBodyForModel(body []byte, model string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return body
	}
	if _, ok := obj["model"]; !ok {
		return body
	}
	obj["model"], _ = json.Marshal("models/" + model)
	out, err := json.Marshal(obj)
	if err != nil {
		return body
	}
	return out
}

// geminiError is Google's error body (https://ai.google.dev/gemini-api/docs/troubleshooting):
// {"error":{"code","message","status","details"}}, which the genai SDKs parse
// into their APIError.
type geminiError struct {
	Error geminiErrorInfo `json:"error"`
}

type geminiErrorInfo struct {
	Code    int              `json:"code"`
	Message string           `json:"message"`
	Status  string           `json:"status"`
	Details []map[string]any `json:"details,omitempty"`
}

// geminiErrorBody renders an error of Breakwater's in Google's shape; code
// goes in a google.rpc.ErrorInfo detail, as Google's own reasons do.
func geminiErrorBody(status int, code, message string) []byte {
	e := geminiError{Error: geminiErrorInfo{Code: status, Message: message, Status: googleStatus(status)}}
	if code != "" {
		e.Error.Details = []map[string]any{{
			"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
			"reason": strings.ToUpper(code),
			"domain": "breakwater",
		}}
	}
	b, _ := json.Marshal(e)
	return b
}

// googleStatus maps an HTTP status to the google.rpc.Code name Google's APIs
// send with it (https://cloud.google.com/apis/design/errors#handling_errors).
func googleStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented, http.StatusMethodNotAllowed:
		return "UNIMPLEMENTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// limitZero finds "limit: 0" in a quota message ("Quota exceeded for metric:
// ..., limit: 0, model: ..."): a quota this key does not have at all.
var limitZero = regexp.MustCompile(`\blimit: 0(?:[^0-9.]|$)`)

// classifyGemini reads a Gemini refusal
// (https://ai.google.dev/gemini-api/docs/rate-limits): RESOURCE_EXHAUSTED and
// UNAVAILABLE are congestion; a google.rpc.RetryInfo detail's retryDelay is
// the wait; a google.rpc.QuotaFailure naming a per-day quota, or a quota with
// limit 0, cannot come back soon, so the request is not retried on the same
// target (it falls back, or fails naming the quota).
func classifyGemini(status int, _ http.Header, body []byte) upstream.Verdict {
	var v upstream.Verdict
	var e struct {
		Error *struct {
			Message string            `json:"message"`
			Status  string            `json:"status"`
			Details []json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return v
	}
	switch e.Error.Status {
	case "RESOURCE_EXHAUSTED", "UNAVAILABLE":
		v.Congestion = true
		v.Reason = e.Error.Status
	}
	var quotas []string
	for _, raw := range e.Error.Details {
		var d struct {
			Type       string `json:"@type"`
			RetryDelay string `json:"retryDelay"`
			Violations []struct {
				QuotaMetric string `json:"quotaMetric"`
				QuotaID     string `json:"quotaId"`
				QuotaValue  string `json:"quotaValue"`
			} `json:"violations"`
		}
		if json.Unmarshal(raw, &d) != nil {
			continue
		}
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			// A google.protobuf.Duration in JSON: seconds with an "s" suffix.
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur > 0 {
				v.RetryAfter = dur
			}
		case strings.HasSuffix(d.Type, "google.rpc.QuotaFailure"):
			for _, q := range d.Violations {
				name := q.QuotaID
				if name == "" {
					name = q.QuotaMetric
				}
				switch {
				case q.QuotaValue == "0":
					v.NoRetrySameTarget = true
					quotas = append(quotas, fmt.Sprintf("quota %s has limit 0", name))
				case perDay(q.QuotaID) || perDay(q.QuotaMetric):
					v.NoRetrySameTarget = true
					quotas = append(quotas, fmt.Sprintf("daily quota %s exhausted", name))
				case name != "":
					quotas = append(quotas, fmt.Sprintf("quota %s exhausted", name))
				}
			}
		}
	}
	if status == http.StatusTooManyRequests && limitZero.MatchString(e.Error.Message) && !v.NoRetrySameTarget {
		v.NoRetrySameTarget = true
		quotas = append(quotas, "a quota with limit 0")
	}
	if len(quotas) > 0 {
		v.Reason = e.Error.Status + ": " + strings.Join(quotas, "; ")
	}
	return v
}

// perDay reports whether a quota id or metric is a daily one
// ("GenerateRequestsPerDayPerProjectPerModel-FreeTier",
// ".../generate_requests_per_day").
func perDay(s string) bool {
	s = strings.ToLower(strings.ReplaceAll(s, "_", ""))
	return strings.Contains(s, "perday")
}
