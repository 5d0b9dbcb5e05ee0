package gemini

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// geminiPassEndpoint is the endpoint label of Gemini requests passed through
// uncached (countTokens, models, files, ...): one label, so a path never
// becomes a metric label.
const geminiPassEndpoint = "/v1beta/*"

// API registers the Gemini API: generateContent and
// streamGenerateContent?alt=sse under /v1beta/ and /v1/models/ go through the
// cached flow, every other Gemini request is passed through to the model's
// route.
var API = wire.API{
	Name:   "gemini",
	Errors: geminiErrors,
	// The genai SDKs send x-goog-api-client on every request.
	Claims: func(h http.Header) bool {
		return h.Get("X-Goog-Api-Client") != "" || h.Get("X-Goog-Api-Key") != ""
	},
	Sanitize: moveGeminiKey,
	Routes: []wire.Route{
		{Path: "/v1beta/*", Handler: handleGemini, Budget: true},
		// /v1/models/{model}:{method} is Gemini's stable API; any other
		// /v1/models/... request is OpenAI's (GET /v1/models/{id}), passed
		// through as before.
		{Path: "/v1/models/*", Handler: handleStable, Budget: true},
	},
}

// Errors is the Format of a Gemini route before its request is parsed:
// only its error shape is used.
var Errors = geminiErrors

// handleStable serves /v1/models/*: Gemini's POST {model}:{method}, or a
// pass-through.
func handleStable(h wire.Host) echo.HandlerFunc {
	gemini := handleGemini(h)
	return func(c echo.Context) error {
		if _, method := geminiTarget(strings.TrimPrefix(c.Request().URL.Path, "/v1")); method != "" && c.Request().Method == http.MethodPost {
			return gemini(c)
		}
		return h.Forward(c, "")
	}
}

// handleGemini serves one Gemini API request.
func handleGemini(h wire.Host) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if err := moveGeminiKey(req); err != nil {
			return h.Error(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error())
		}
		rest, version := geminiRest(req.URL.Path), geminiVersion(req.URL.Path)
		model, method := geminiTarget(rest)
		query := req.URL.Query()
		if req.Method == http.MethodPost && model != "" {
			f := geminiFormat{model: model, version: version, query: query, storeMaxTokens: h.StoreMaxTokens()}
			switch {
			case method == "generateContent":
				return h.Serve(c, f.format())
			case method == "streamGenerateContent" && query.Get("alt") == "sse":
				// Without alt=sse the API streams one JSON array, which is
				// passed through.
				f.stream = true
				return h.Serve(c, f.format())
			}
		}
		return geminiPassthrough(h, c, model, version+rest, query)
	}
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

// geminiPassthrough forwards a Gemini request that is not cached: one naming
// no model to the Gemini upstream's pass-through when there is one, else to
// the route of the model its path names (the default upstream when none),
// with the caller's retries and fallbacks, answering what the upstream said.
func geminiPassthrough(h wire.Host, c echo.Context, model, path string, query url.Values) error {
	req := c.Request()
	version := geminiVersionOr(geminiVersion(path))
	rest := geminiRest(path)
	if model == "" {
		// The forwarder puts what follows the version after the Gemini
		// upstream's root when that holds a version, and the whole path after
		// a bare host.
		oldPath, oldRaw := req.URL.Path, req.URL.RawPath
		req.URL.Path, req.URL.RawPath = version+rest, ""
		if h.ForwardHome(c) {
			return nil
		}
		req.URL.Path, req.URL.RawPath = oldPath, oldRaw
	}
	body, answered, err := h.Body(c)
	if answered {
		return err
	}
	if len(body) == 0 {
		body = nil
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
		Method:   req.Method,
		Path:     pathFor(model),
		Model:    model,
		Body:     body,
		Classify: classifyGemini,
	}
	if model != "" {
		ureq.ForModel = func(m string) (string, []byte) { return pathFor(m), geminiBodyForModel(body, m) }
	}
	return h.Call(c, geminiErrors, geminiPassEndpoint, ureq)
}
