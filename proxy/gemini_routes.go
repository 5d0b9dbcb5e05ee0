package proxy

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// geminiPassEndpoint is the endpoint label of Gemini requests passed through
// uncached (countTokens, models, files, ...): one label, so a path never
// becomes a metric label.
const geminiPassEndpoint = "/v1beta/*"

// mountGemini serves the Gemini API under /v1beta/ and /v1/models/:
// generateContent and streamGenerateContent?alt=sse go through the cached
// flow, every other Gemini request is passed through to the model's route.
func (s *Server) mountGemini(e *echo.Echo) {
	e.Any("/v1beta/*", s.handleGemini, s.bodyBudget)
	// /v1/models/{model}:{method} is Gemini's stable API; any other
	// /v1/models/... request is OpenAI's (GET /v1/models/{id}), passed
	// through as before.
	e.Any("/v1/models/*", func(c echo.Context) error {
		if _, method := geminiTarget(strings.TrimPrefix(c.Request().URL.Path, "/v1")); method != "" && c.Request().Method == http.MethodPost {
			return s.handleGemini(c)
		}
		return s.handleForward(c)
	}, s.bodyBudget)
}

// handleGemini serves one Gemini API request.
func (s *Server) handleGemini(c echo.Context) error {
	c.Set(formatCtxKey, geminiErrors)
	req := c.Request()
	if err := moveGeminiKey(req); err != nil {
		return writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	rest, version := geminiRest(req.URL.Path), geminiVersion(req.URL.Path)
	model, method := geminiTarget(rest)
	query := req.URL.Query()
	if req.Method == http.MethodPost && model != "" {
		f := geminiFormat{model: model, version: version, query: query, storeMaxTokens: s.opts.StoreMaxTokens}
		switch {
		case method == "generateContent":
			c.Set(formatCtxKey, f)
			return s.serveCached(c, f)
		case method == "streamGenerateContent" && query.Get("alt") == "sse":
			// Without alt=sse the API streams one JSON array, which is
			// passed through.
			f.stream = true
			c.Set(formatCtxKey, f)
			return s.serveCached(c, f)
		}
	}
	return s.geminiPassthrough(c, model, version+rest, query)
}

// moveGeminiKey moves an API key given as the "key" query parameter into the
// x-goog-api-key header, which the API reads the same way
// (https://ai.google.dev/gemini-api/docs/api-key). From here on the key is
// partitioned like any other credential and never part of a URL: not in
// the URL sent upstream (whose errors end up in messages and logs), not in
// any path logged.
func moveGeminiKey(req *http.Request) error {
	q := req.URL.Query()
	keys, ok := q["key"]
	if !ok {
		return nil
	}
	q.Del("key")
	req.URL.RawQuery = q.Encode()
	req.RequestURI = req.URL.RequestURI()
	key := ""
	for _, k := range keys {
		switch {
		case k == "":
		case key == "":
			key = k
		case k != key:
			return errors.New("the request gives two different API keys in the key query parameter; send one")
		}
	}
	if key == "" {
		return nil
	}
	if h := req.Header.Get("X-Goog-Api-Key"); h != "" && h != key {
		return errors.New("the request gives two different API keys, in the key query parameter and in x-goog-api-key; send one")
	}
	req.Header.Set("X-Goog-Api-Key", key)
	return nil
}

// geminiRest is the path after the API version: "/models/m:generateContent"
// for "/v1beta/models/m:generateContent" and "/v1/models/m:generateContent".
func geminiRest(path string) string {
	rest, _ := upstream.CutAPIVersion(path)
	return rest
}

// geminiVersion is the API version segment path starts with ("/v1beta").
func geminiVersion(path string) string {
	rest, _ := upstream.CutAPIVersion(path)
	return path[:len(path)-len(rest)]
}

// geminiVersionOr is version, or "/v1beta" (the version the genai SDKs call
// by default) when there is none.
func geminiVersionOr(version string) string {
	if version == "" {
		return "/v1beta"
	}
	return version
}

// geminiTarget reads "/models/{model}[:{method}]": the model ("" when the
// path names none) and the method ("" for a request on the model itself).
func geminiTarget(rest string) (model, method string) {
	name, ok := strings.CutPrefix(rest, "/models/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", ""
	}
	model, method, _ = strings.Cut(name, ":")
	return model, method
}

// geminiPassthrough forwards a Gemini request that is not cached to the
// route of the model its path names (the default upstream when none), with
// the caller's retries and fallbacks, and answers what the upstream said.
func (s *Server) geminiPassthrough(c echo.Context, model, path string, query url.Values) error {
	req := c.Request()
	version := geminiVersionOr(geminiVersion(path))
	rest := geminiRest(path)
	if model == "" && s.geminiFwd != nil {
		// The forwarder puts what follows the version after the Gemini
		// upstream's root when that holds a version, and the whole path after
		// a bare host.
		req.URL.Path, req.URL.RawPath = version+rest, ""
		c.Response().Header().Set(HeaderCache, OutcomeBypass)
		s.stats.outcome(OutcomeBypass)
		s.geminiFwd.ServeHTTP(c.Response(), req)
		return nil
	}
	x := &exchange{c: c, log: s.log, reqID: requestIDOf(c), format: geminiErrors, endpoint: geminiPassEndpoint, start: s.opts.Now()}
	body, answered, err := s.requestBody(c)
	if answered {
		return err
	}
	if len(body) == 0 {
		body = nil
	}
	ctl, err := parseControls(req.Header)
	if err != nil {
		return writeError(c, http.StatusBadRequest, "invalid_header", "breakwater: "+err.Error(), 0)
	}
	pathFor := func(m string) string {
		p := version + rest
		if model != "" {
			p = version + "/models/" + url.PathEscape(m) + strings.TrimPrefix(rest, "/models/"+model)
		}
		if q := query.Encode(); q != "" {
			p += "?" + q
		}
		return p
	}
	ureq := &upstream.Request{
		Method:    req.Method,
		Path:      pathFor(model),
		Model:     model,
		Body:      body,
		Header:    req.Header,
		RequestID: req.Header.Get(HeaderRequestID),
		Class:     ctl.class,
		Classify:  classifyGemini,
		Upstream:  s.opts.GeminiUpstream,
	}
	if model != "" {
		ureq.ForModel = func(m string) (string, []byte) { return pathFor(m), geminiBodyForModel(body, m) }
	}
	s.stats.calls.Add(1)
	resp, err := s.opts.Caller.Do(req.Context(), ureq)
	x.called = true
	if err != nil {
		if req.Context().Err() != nil {
			s.finish(x, OutcomeBypass, 499, 0, "")
			return nil
		}
		s.stats.errors.Add(1)
		s.finish(x, OutcomeBypass, statusOf(err), 0, "")
		return writeUpstreamError(c, err)
	}
	h := c.Response().Header()
	h.Set(HeaderCache, OutcomeBypass)
	h.Set(HeaderUpstream, resp.Target)
	h.Set(HeaderAttempts, strconv.Itoa(resp.Attempts))
	x.attempts = resp.Attempts
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = echo.MIMEApplicationJSON
	}
	s.finish(x, OutcomeBypass, resp.Status, 0, resp.Target)
	if resp.Rest != nil {
		defer resp.Rest.Close()
		return relayLong(c, resp, ct)
	}
	return c.Blob(resp.Status, ct, resp.Body)
}
