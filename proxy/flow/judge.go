package flow

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/breakwater-dev/breakwater/cache/verify"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// judgeCredentials are the client headers that carry its key in every API,
// which a judge call keeps (so it goes out with the same key, on the same
// per-key lane, as the request would), with the Format's own
// (wire.Judge Headers).
var judgeCredentials = [...]string{"Authorization"}

// errJudgeStatus is a judge call answered with another status than 200.
var errJudgeStatus = errors.New("the judge call was not answered 200")

// lookupContext is the context of x's cache lookup: with the auto judge
// (Verify.Auto) it carries x as the verify.Asker, so a semantic candidate
// is put to the model x itself is routed to.
func (s *Flow) lookupContext(x *exchange) context.Context {
	ctx := x.req.Context()
	if v := s.opts.Verify; v != nil && v.Auto {
		if x.format.Judge != nil {
			return verify.WithAsker(ctx, judgeAsker{x})
		}
	}
	return ctx
}

// judgeAsker asks the auto judge's prompt of x's model (verify.Asker).
type judgeAsker struct{ x *exchange }

// Ask sends the judge prompt through the caller as a short call of x's own
// route (or the route's judge model, Verify.JudgeModel), wire API, home
// upstream, credentials and class, ahead of full requests in its lane
// (upstream.Request.Short), and returns the text of the answer. Its tokens
// and cost are counted as spent on verification.
func (a judgeAsker) Ask(ctx context.Context, system, user string) (string, error) {
	x := a.x
	s := x.srv
	j := x.format.Judge
	// The request's own model routes the call (its targets, lanes and
	// keys); the route's judge model, when it names one, is what is asked,
	// and a target serving another model is asked with that model.
	model, asked := x.shape.Model, x.shape.Model
	if jm := s.opts.Verify.JudgeModel; jm != nil {
		if m := jm(model); m != "" {
			asked = m
		}
	}
	path, body := j.Request(asked, system, user)
	in := x.req.Header
	h := make(http.Header, len(judgeCredentials)+2)
	for _, k := range append(judgeCredentials[:], j.Headers...) {
		if v := in[http.CanonicalHeaderKey(k)]; len(v) > 0 {
			h[http.CanonicalHeaderKey(k)] = v
		}
	}
	ureq := &upstream.Request{
		Model: model, Body: body, Header: h, Class: x.ctl.class, Short: true,
		RequestID: x.rec.RequestID + "-judge",
		GenAI:     s.genAIRequest(x.format, false),
	}
	ureq.GenAI.Judge = true
	s.shapeRequest(x.format, x.home, ureq)
	// The judge's own path and body for every target, whatever model it
	// serves (Gemini carries the model in the path).
	ureq.Path = path
	ureq.ForModel = func(m string) (string, []byte) { return j.Request(m, system, user) }
	ureq.SameUpstream, ureq.BindUpstream = false, ""
	resp, err := s.opts.Caller.Do(ctx, ureq)
	if err != nil {
		return "", err
	}
	if resp.Rest != nil {
		resp.Rest.Close()
		return "", fmt.Errorf("judge answer longer than server.max_answer_bytes")
	}
	s.countJudge(x, resp, model, asked)
	if resp.Status != http.StatusOK {
		return "", fmt.Errorf("%w: %d", errJudgeStatus, resp.Status)
	}
	return x.format.AnswerText(resp.Body), nil
}

// countJudge tells the hooks a judge call's tokens, spent on verification,
// by the model asked (the judge model, on a target that serves the route's).
func (s *Flow) countJudge(x *exchange, resp *upstream.Response, model, asked string) {
	h := s.opts.Hooks.Judge
	if h == nil || resp.Status != http.StatusOK {
		return
	}
	if resp.Model == model {
		resp.Model = asked
	}
	h(resp.Model, x.key.Partition, x.format.Usage(resp.Body))
}
