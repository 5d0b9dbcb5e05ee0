package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// newForwarder builds the reverse proxy for /v1/* paths Breakwater does not
// cache (files, batches, audio, count_tokens, ...): they go to an upstream
// as they are, headers included, streaming in both directions. A non-empty
// key replaces the client's credential, sent in the auth style.
func (s *Server) newForwarder(root *url.URL, key, auth string) *httputil.ReverseProxy {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// /v1/files -> <root>/files: the root already holds the version
			// (a bare host gets the path whole, version included).
			rest := pr.In.URL.Path
			if upstream.HasAPIRoot(root.String()) {
				rest, _ = upstream.CutAPIVersion(rest)
			}
			pr.Out.URL.Scheme = root.Scheme
			pr.Out.URL.Host = root.Host
			pr.Out.URL.Path = strings.TrimSuffix(root.Path, "/") + rest
			pr.Out.URL.RawPath = ""
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.Out.Host = root.Host
			if key != "" {
				upstream.SetAuth(pr.Out.Header, auth, key)
			}
		},
		Transport:     s.opts.Transport,
		FlushInterval: -1,
		ErrorHandler:  s.passthroughFailed("the default upstream"),
	}
	return rp
}

func (s *Server) handleForward(c echo.Context) error {
	// A key given in the URL never travels in one (wire.API.Sanitize): the
	// proxy's error names the URL it failed to reach, and that error is
	// logged.
	if err := s.sanitize(c.Request()); err != nil {
		return writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	fwd := s.fwd
	// A request an API claims goes to that API's home upstream.
	if a := s.claimant(c.Request().Header); a != nil && a.home != "" && s.ownerFwd[a.home] != nil {
		fwd = s.ownerFwd[a.home]
	}
	if fwd == nil {
		return writeError(c, http.StatusNotFound, "not_found", "breakwater: "+c.Request().URL.Path+" is not served (no default upstream configured)", 0)
	}
	c.Response().Header().Set(HeaderCache, OutcomeBypass)
	s.countBypass(c)
	fwd.ServeHTTP(c.Response(), c.Request())
	return nil
}
