package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
)

// maxJudgeBody bounds a judge's response body.
const maxJudgeBody = 1 << 20

// RerankOptions configure a Rerank judge.
type RerankOptions struct {
	// URL is the API root; the judge posts to URL + "/rerank". Required.
	URL string
	// Model is sent as "model". Empty: DefaultRerankModel.
	Model string
	// APIKey is sent as "Authorization: Bearer <APIKey>"; empty sends none.
	APIKey string
	// MinScore accepts a candidate whose relevance_score is at least this.
	// Zero: DefaultMinScore. Negative: no minimum (every candidate the
	// reranker scores is accepted, whatever the scale of its scores).
	MinScore float64
	// Client sends the requests. Nil: a client without its own timeout (the
	// Verifier bounds each call).
	Client *http.Client
}

// Rerank is a judge behind the Cohere-compatible rerank API (Cohere, vLLM,
// Infinity, Jina, TEI's /rerank adaptors): the new question is the query,
// the candidates' questions are the documents.
type Rerank struct {
	o RerankOptions
	// endpoints are URL+"/rerank" and, when URL ends in a version segment
	// (/v1, /v2), the same path without it: vLLM serves both, Cohere and
	// Jina serve /v1/rerank or /v2/rerank, Infinity only /rerank at the
	// root. A 404 on one moves to the next, and the one that answers is kept.
	endpoints []string
	use       atomic.Int32
}

// NewRerank returns a Rerank judge.
func NewRerank(o RerankOptions) (*Rerank, error) {
	if o.URL == "" {
		return nil, fmt.Errorf("new rerank judge: a URL is required")
	}
	o.URL = strings.TrimRight(o.URL, "/")
	if o.Model == "" {
		o.Model = DefaultRerankModel
	}
	if o.MinScore == 0 {
		o.MinScore = DefaultMinScore
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	r := &Rerank{o: o, endpoints: []string{o.URL + "/rerank"}}
	if i := strings.LastIndexByte(o.URL, '/'); i > 0 && versionSegment.MatchString(o.URL[i+1:]) {
		r.endpoints = append(r.endpoints, o.URL[:i]+"/rerank")
	}
	return r, nil
}

var versionSegment = regexp.MustCompile(`^v[0-9]+$`)

// Name implements Judge.
func (r *Rerank) Name() string { return JudgeRerank }

type rerankRequest struct {
	Model     string   `json:"model"`
	Query     string   `json:"query"`
	Documents []string `json:"documents"`
}

type rerankResponse struct {
	Results []struct {
		Index          *int     `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
}

// Judge implements Judge: one POST for every candidate. A result missing
// for a document (a server applying its own top_n) is a rejection; an
// index out of range, a repeated index or a missing score is an error.
func (r *Rerank) Judge(ctx context.Context, query string, candidates []string) ([]bool, error) {
	body, err := json.Marshal(rerankRequest{Model: r.o.Model, Query: query, Documents: candidates})
	if err != nil {
		return nil, fmt.Errorf("encode rerank request: %w", err)
	}
	first := int(r.use.Load())
	for i := first; i < len(r.endpoints); i++ {
		out, err := r.post(ctx, r.endpoints[i], body, candidates)
		if errors.Is(err, errNotFound) && i+1 < len(r.endpoints) {
			continue
		}
		if err == nil && i != first {
			r.use.Store(int32(i))
		}
		return out, err
	}
	return nil, fmt.Errorf("call reranker: no endpoint")
}

var errNotFound = errors.New("not found")

func (r *Rerank) post(ctx context.Context, endpoint string, body []byte, candidates []string) ([]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build rerank request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.APIKey)
	}
	resp, err := r.o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("call reranker: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJudgeBody+1))
	if err != nil {
		return nil, fmt.Errorf("read rerank response: %w", err)
	}
	if len(data) > maxJudgeBody {
		return nil, fmt.Errorf("read rerank response: larger than %d bytes", maxJudgeBody)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("call reranker %s: %w", endpoint, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("call reranker: status %d: %.200s", resp.StatusCode, data)
	}
	var rr rerankResponse
	if err := json.Unmarshal(data, &rr); err != nil {
		return nil, fmt.Errorf("decode rerank response: %w", err)
	}
	if len(rr.Results) == 0 {
		return nil, fmt.Errorf("decode rerank response: no results for %d documents", len(candidates))
	}
	out := make([]bool, len(candidates))
	seen := make([]bool, len(candidates))
	for _, res := range rr.Results {
		if res.Index == nil || res.RelevanceScore == nil {
			return nil, fmt.Errorf("decode rerank response: a result without index or relevance_score")
		}
		i := *res.Index
		if i < 0 || i >= len(candidates) || seen[i] {
			return nil, fmt.Errorf("decode rerank response: index %d invalid or repeated for %d documents", i, len(candidates))
		}
		seen[i] = true
		out[i] = r.o.MinScore < 0 || *res.RelevanceScore >= r.o.MinScore
	}
	return out, nil
}
