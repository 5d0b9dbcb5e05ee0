package proxy

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

const formatCtxKey = "breakwater.format"

// serverCtxKey holds the *Server serving a request, for the error shape of a
// request no route's Format covers (formatOf).
const serverCtxKey = "breakwater.server"

// serveFormat is the handler of a route served by f through the cached flow,
// whose models no route lists go to upstream home.
func (s *Server) serveFormat(f Format, home string) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(formatCtxKey, f)
		return s.serveCached(c, f, home)
	}
}

// formatOf is the Format of the route serving c; for routes that have none
// (errors of the router itself, pass-through), that of the API claiming the
// request (passthroughFormat); nil before the request met this server.
func formatOf(c echo.Context) Format {
	if f, ok := c.Get(formatCtxKey).(Format); ok {
		return f
	}
	if s, ok := c.Get(serverCtxKey).(*Server); ok {
		return s.passthroughFormat(c.Request().Header)
	}
	return nil
}

// passthroughFormat is the Format whose errors a request outside the cached
// routes gets: that of the registered API that claims it (wire.API.Claims),
// else the default API's.
func (s *Server) passthroughFormat(h http.Header) Format {
	if a := s.claimant(h); a != nil {
		return a.Errors
	}
	return s.defaultErrors
}

// claimant is the registered API (with an error shape) that claims a
// request outside the cached routes by its headers, or nil.
func (s *Server) claimant(h http.Header) *mountedAPI {
	for _, a := range s.apis {
		if a.Claims != nil && a.Errors != nil && a.Claims(h) {
			return a
		}
	}
	return nil
}
