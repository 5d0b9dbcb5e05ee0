package upstream

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/lib/setting"
)

// The options validate themselves, each problem a *setting.Error naming the
// field by its configuration key ([retry], [breaker], [[upstreams]],
// [[models]]), so that the config package reports a file's mistakes with the
// rules written here, once. A zero field is valid: it means its Default…;
// a negative one means none where the field's comment says so, and is
// refused otherwise.

// NeverRetry are the statuses that the same request bytes would get again
// (RFC 9110 §15.5: the request itself is wrong, unauthorised, forbidden,
// aimed at nothing, in conflict, too large or unprocessable), so RetryOn
// may not list them.
var NeverRetry = []int{400, 401, 403, 404, 409, 413, 422}

// Validate reports every problem of p ([retry]).
func (p RetryPolicy) Validate() error {
	var es setting.Errors
	setting.Negative(&es, "retry.max_attempts", p.MaxAttempts, "must be >= 1 (1: no retry)")
	base := p.withDefaults().BaseDelay
	if p.MaxDelay != 0 && max(p.MaxDelay, 0) < base {
		es.Add("retry.max_delay", p.MaxDelay, "must be >= retry.base_delay (%v)", base)
	}
	setting.Negative(&es, "retry.deadline", p.Deadline, "must be > 0")
	for i, code := range p.RetryOn {
		key := fmt.Sprintf("retry.retry_on[%d]", i)
		switch {
		case code < 400 || code > 599:
			es.Add(key, code, "must be a 4xx or 5xx status")
		case slices.Contains(NeverRetry, code):
			es.Add(key, code, "is never retried: 400, 401, 403, 404, 409, 413 and 422 would fail the same way again")
		case slices.Contains(p.RetryOn[:i], code):
			es.Add(key, code, "listed twice")
		}
	}
	if p.RetryAfterCap != 0 && p.RetryAfterCap < MinRetryAfterCap {
		es.Add("retry.retry_after_cap", p.RetryAfterCap, "must be >= 1s")
	}
	return es.Err()
}

// MinRetryAfterCap is the shortest RetryAfterCap: a cap under a second would
// turn a server's "Retry-After: 1" (RFC 9110 §10.2.3, whole seconds) into a
// retry the server said to wait for.
const MinRetryAfterCap = time.Second

// ValidateUpstreams reports every problem of ups ([[upstreams]], the
// entries' keys indexed in order) and returns the valid names declared.
func ValidateUpstreams(ups []Upstream) (names []string, err error) {
	var es setting.Errors
	if len(ups) == 0 {
		es = append(es, errors.New(`no [[upstreams]]: declare at least one, e.g. name = "openai", base_url = "https://api.openai.com/v1"`))
	}
	for i, u := range ups {
		key := fmt.Sprintf("upstreams[%d]", i)
		switch {
		case u.Name == "":
			es.Add(key+".name", u.Name, `name the upstream, e.g. "openai"`)
		case !IsName(u.Name):
			es.Add(key+".name", u.Name, "must be letters, digits, '.', '_' or '-'")
		case slices.Contains(names, u.Name):
			es.Add(key+".name", u.Name, "another [[upstreams]] has this name")
		default:
			names = append(names, u.Name)
		}
		if u.BaseURL == "" {
			es.Add(key+".base_url", u.BaseURL, "set the upstream's API root, e.g. https://api.openai.com/v1")
		} else if err := ValidateBaseURL(key+".base_url", u.BaseURL); err != nil {
			es = append(es, err)
		}
		if !slices.Contains([]string{"", AuthBearer, AuthXAPIKey, AuthXGoogAPIKey}, u.Auth) {
			es.Add(key+".auth", u.Auth, `must be "bearer", "x-api-key" or "x-goog-api-key"`)
		}
		setting.Negative(&es, key+".timeout", u.Timeout, "must be > 0")
		setting.Negative(&es, key+".max_concurrency", u.MaxConcurrency, "must be >= 1")
		for _, class := range slices.Sorted(maps.Keys(u.Pools)) {
			if !IsName(class) {
				es.Add(key+".pools", class, "a class must be letters, digits, '.', '_' or '-' (it is matched against X-Breakwater-Class)")
			}
			if p := u.Pools[class]; p.MaxConcurrency < 0 {
				es.Add(key+".pools."+class+".max_concurrency", p.MaxConcurrency, "must be >= 1")
			}
		}
	}
	return names, es.Err()
}

// ValidateRoutes reports every problem of routes ([[models]], indexed in
// order) given the upstreams' names.
func ValidateRoutes(routes []Route, upstreams []string) error {
	var es setting.Errors
	have := "none"
	if len(upstreams) > 0 {
		have = strings.Join(upstreams, ", ")
	}
	var seen []string
	for i, r := range routes {
		key := fmt.Sprintf("models[%d]", i)
		switch {
		case r.Name == "":
			es.Add(key+".name", r.Name, `set the model name clients request, e.g. "gpt-4o-mini"`)
		case slices.Contains(seen, r.Name):
			es.Add(key+".name", r.Name, "another [[models]] has this name")
		default:
			seen = append(seen, r.Name)
		}
		if len(r.Targets) == 0 {
			es.Add(key+".targets", "", "add at least one {upstream = ..., model = ...}")
		}
		for j, t := range r.Targets {
			tkey := fmt.Sprintf("%s.targets[%d]", key, j)
			switch {
			case t.Upstream == "":
				es.Add(tkey+".upstream", t.Upstream, "name one of the [[upstreams]] (have: %s)", have)
			case !slices.Contains(upstreams, t.Upstream):
				es.Add(tkey+".upstream", t.Upstream, "no [[upstreams]] named %q (have: %s)", t.Upstream, have)
			}
			setting.Negative(&es, tkey+".priority", t.Priority, "must be >= 0 (lower is tried first)")
			if !(t.Weight >= 0) {
				es.Add(tkey+".weight", t.Weight, "must be > 0")
			}
		}
	}
	return es.Err()
}

// validate is New's check: every option's problems, then what New needs
// beyond them.
func (o *Options) validate() error {
	names, uerr := ValidateUpstreams(o.Upstreams)
	errs := []error{o.Retry.Validate(), o.Breaker.Validate(), uerr,
		ValidateRoutes(o.Routes, names)}
	switch {
	case o.DefaultUpstream != "" && !slices.Contains(names, o.DefaultUpstream):
		errs = append(errs, fmt.Errorf("default upstream %q is not an upstream", o.DefaultUpstream))
	case len(o.Routes) == 0 && o.DefaultUpstream == "":
		errs = append(errs, errors.New("no routes and no default upstream"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate options: %w", err)
	}
	return nil
}

// ValidateBaseURL reports a base_url that is not an http(s) URL of an API
// root: with a query or fragment, or ending in an endpoint path the caller
// appends itself.
func ValidateBaseURL(key, value string) error {
	u, err := url.Parse(value)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return &setting.Error{Key: key, Value: value, Problem: "must be an http(s) URL of the API root, e.g. https://api.openai.com/v1"}
	case u.RawQuery != "" || u.Fragment != "":
		return &setting.Error{Key: key, Value: value, Problem: "must not have a query or fragment"}
	}
	if root, endpoint, ok := apiRoot(value); ok {
		return &setting.Error{Key: key, Value: value, Problem: fmt.Sprintf("ends in the endpoint path %q, which Breakwater appends to the API root itself (requests would go to %s%s): use %q", endpoint, value, endpoint, root)}
	}
	return nil
}

// endpointPaths are the request paths Breakwater (or the judge and the
// embedder) appends to a base_url: OpenAI's Chat Completions, Completions,
// Responses, Embeddings and Models; Anthropic's Messages; Cohere-style
// /rerank; Gemini's models/{model}:generateContent.
var endpointPaths = []string{"/chat/completions", "/completions", "/responses", "/embeddings",
	"/messages", "/models", "/rerank"}

// apiRoot reports whether base ends in an endpoint path, and the API root
// to use instead (base without it).
func apiRoot(base string) (root, endpoint string, ok bool) {
	trimmed := strings.TrimRight(base, "/")
	if i := strings.Index(trimmed, "/models/"); i >= 0 && strings.Contains(trimmed[i:], ":") {
		return trimmed[:i], trimmed[i:], true // Gemini: .../v1beta/models/gemini-2.0-flash:generateContent
	}
	for _, p := range endpointPaths {
		if strings.HasSuffix(trimmed, p) {
			return strings.TrimSuffix(trimmed, p), p, true
		}
	}
	return "", "", false
}

// IsName reports whether s names an upstream or a pool class: letters,
// digits, '.', '_' and '-'.
func IsName(s string) bool {
	for _, r := range s {
		switch {
		case r == '.', r == '_', r == '-', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return s != ""
}
