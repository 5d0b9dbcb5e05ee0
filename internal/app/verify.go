package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/cache/guard"
	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/config"
	"github.com/breakwater-dev/breakwater/proxy"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// verifyParts are the judge and the live estimate, shared by the cache (the
// verifier) and the proxy (the estimator and the answer comparer).
type verifyParts struct {
	verifier  *verify.Verifier
	estimator *verify.Estimator
	comparer  *verify.Comparer
	rate      float64
	// auto: the judge asks the request's own model; judgeModels are the
	// [[models]] entries' judge_model.
	auto        bool
	judgeModels map[string]string
}

// newVerify builds [cache.verify]: the judge (auto, none, rerank or llm), the
// bounded verifier around it and the estimator. emb may be nil (no semantic
// tier): answers are then compared as text only.
func newVerify(cfg *config.Config, opts Options, caller *upstream.Caller, emb cache.Embedder, m *verify.Metrics) (*verifyParts, error) {
	vc := cfg.Cache.Verify
	var judge verify.Judge
	switch vc.Judge {
	case config.JudgeRerank:
		url, keyEnv := vc.URL, vc.APIKeyEnv
		if url == "" {
			// The default upstream's root: vLLM and Infinity serve /rerank
			// beside /chat/completions.
			u, ok := cfg.Upstream(cfg.DefaultUpstream)
			if !ok {
				return nil, fmt.Errorf("config: cache.verify.url is empty and there is no default upstream to take it from")
			}
			url = u.BaseURL
			if keyEnv == "" {
				keyEnv = u.APIKeyEnv
			}
		}
		r, err := verify.NewRerank(verify.RerankOptions{
			URL: url, Model: vc.Model, APIKey: envOr(opts.Env, keyEnv), MinScore: vc.MinScore,
		})
		if err != nil {
			return nil, fmt.Errorf("config: cache.verify: %w", err)
		}
		judge = r
	case config.JudgeLLM:
		l, err := verify.NewLLM(verify.LLMOptions{Caller: judgeCaller{caller}, Model: vc.Model})
		if err != nil {
			return nil, fmt.Errorf("config: cache.verify: %w", err)
		}
		judge = l
	case config.JudgeAuto:
		judge = verify.Auto{}
	}
	vo := vc.Options
	vo.Judge, vo.Metrics, vo.NoVerdictMiss = judge, m, vc.MissWithoutVerdict()
	if vc.Judge == config.JudgeAuto || vc.Judge == config.JudgeLLM {
		// A chat model's "same" on a candidate only the judged guard's
		// slack let through is asked again, the questions swapped.
		vo.Strict = strictGuard()
	}
	// The llm judge shares the chat model's targets: skip it while they are
	// under pressure, when the caller can tell.
	if b, ok := any(caller).(interface {
		Busy(model, upstreamName string) bool
	}); ok && vc.Judge == config.JudgeLLM {
		vo.Busy = func() bool { return b.Busy(vc.Model, "") }
	}
	v, err := verify.New(vo)
	if err != nil {
		return nil, err
	}
	p := &verifyParts{
		verifier:  v,
		estimator: verify.NewEstimator(m, nil),
		// The directive rule is about prompts (an instruction hidden in a
		// question); answers say "yes" and "say" as a matter of course.
		comparer: &verify.Comparer{Embedder: emb, MinSimilarity: float32(vc.AnswerSimilarity), Guard: guard.New(guard.Options{NoDirectives: true}).Check},
		rate:     vc.SampleRate,
		auto:     vc.Judge == config.JudgeAuto,
	}
	for _, md := range cfg.Models {
		if md.JudgeModel != "" {
			if p.judgeModels == nil {
				p.judgeModels = map[string]string{}
			}
			p.judgeModels[md.Name] = md.JudgeModel
		}
	}
	return p, nil
}

// strictGuard is the strict guard's verdict alone.
func strictGuard() func(q, c string) bool {
	g := guard.New(guard.Options{}).Check
	return func(q, c string) bool { ok, _ := g(q, c); return ok }
}

// proxyVerify is the proxy's side of [cache.verify].
func (p *verifyParts) proxyVerify() *proxy.Verify {
	if p == nil {
		return nil
	}
	v := &proxy.Verify{
		Rate: p.rate, Estimator: p.estimator, Judge: p.verifier, Auto: p.auto,
		Compare: func(ctx context.Context, a, b string) bool { return p.comparer.Same(ctx, a, b) },
	}
	if p.judgeModels != nil {
		v.JudgeModel = func(model string) string { return p.judgeModels[model] }
	}
	return v
}

// judgeCaller sends the LLM judge's questions through the upstream caller,
// as Chat Completions requests (verify.Completer).
type judgeCaller struct{ c *upstream.Caller }

func (j judgeCaller) Complete(ctx context.Context, model, class string, body []byte) (int, []byte, error) {
	resp, err := j.c.Do(ctx, &upstream.Request{
		Path: "/v1/chat/completions", Model: model, Body: body, Header: http.Header{}, Class: class,
	})
	if err != nil {
		return 0, nil, err
	}
	if resp.Rest != nil {
		// A verdict is a few bytes; an answer beyond MaxAnswerBytes is no
		// verdict, and its remainder holds an upstream slot until closed.
		resp.Rest.Close()
		return resp.Status, nil, fmt.Errorf("llm judge answer longer than the caller's max answer bytes")
	}
	return resp.Status, resp.Body, nil
}
