package wire

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// API is one wire API's registration: the one thing the core (package
// proxy) knows of it. The list of registered APIs is proxy/wire/apis.All;
// adding an API is one package beneath proxy/wire that exports its API, and
// one line in that list.
type API struct {
	// Name names the API in configuration: the key of [api_upstreams],
	// whose value is the API's home upstream (proxy.Options.APIUpstreams).
	Name string
	// Routes are the paths the API serves, mounted before the /v1/*
	// pass-through catch-all.
	Routes []Route
	// Errors is the Format whose error shape the API's clients get where no
	// cached route's Format applies: pass-through requests it Claims, echo's
	// own errors on its routes, a bespoke handler's errors before it built
	// its Format. Only its Error and StreamError are used there (Format.Check).
	Errors *Format
	// Claims reports whether a request outside the cached routes comes from
	// one of this API's clients, by a header its SDKs always send. Such a
	// request is passed through to the API's home upstream (when that
	// upstream has a pass-through target) and gets errors in the Errors
	// shape. nil claims nothing: the first registered API with a nil Claims
	// is the default one, whose shape every unclaimed request gets.
	Claims func(h http.Header) bool
	// Sanitize runs on every request before it is passed through (and may
	// be called by the API's own handlers): it moves a credential out of the
	// URL into a header, so no key is ever part of a URL sent or logged. An
	// error is answered 400. nil: nothing to do.
	Sanitize func(r *http.Request) error
}

// Route is one path an API serves.
type Route struct {
	// Method is the HTTP method; "" matches any.
	Method string
	// Path is echo's route pattern ("/v1/messages", "/v1beta/*").
	Path string
	// Format, when set, serves the route through the cached flow.
	Format *Format
	// Handler, when Format is nil, is the route's own handler, built once
	// with the Host of this API.
	Handler func(h Host) echo.HandlerFunc
	// Yield passes a request that another registered API claims by its
	// headers (API.Claims) through, as Host.Forward does, instead of
	// serving it: for a path two APIs' SDKs call (GET /v1/models). false:
	// the route serves every request on its path.
	Yield bool
	// Budget admits the request under the server's in-flight body budget
	// (server.max_body_bytes_in_flight; 503 + Retry-After when full). Every
	// route that reads a body into memory sets it; a route with a Format
	// always gets it.
	Budget bool
}

// Host is what the core offers an API's own handlers; one per registered
// API, so pass-through and calls go to that API's home upstream.
type Host interface {
	// Serve runs the cached flow for f on c's request (and makes f the
	// shape of its errors).
	Serve(c echo.Context, f *Format) error
	// Body reads the request body within the server's bounds (413 beyond).
	// answered is true when an error was already sent; return err then.
	Body(c echo.Context) (body []byte, answered bool, err error)
	// Error answers an error in the shape of the route's Format (the API's
	// Errors until Serve or Call set another).
	Error(c echo.Context, status int, code, message string) error
	// Forward passes c's request through uncached: to the upstream that
	// created the answer whose id is owned, when this process or a replica
	// sharing its owners saw it for the tenant of c's headers (and that
	// upstream has a pass-through target); else as the /v1/* catch-all
	// does, to the home upstream of the API that claims it, else to the
	// default upstream. owned "" names no answer.
	Forward(c echo.Context, owned string) error
	// ForwardHome passes c's request through uncached to this API's home
	// upstream's pass-through target, as it is (the path after the API
	// version goes after the target's root). false, with nothing sent, when
	// the home upstream has no pass-through target.
	ForwardHome(c echo.Context) bool
	// Call sends an uncached request through the caller (routing, retries,
	// fallbacks; its Upstream defaults to this API's home upstream and its
	// RequestID and Class are read from the request's headers) and relays
	// the answer, counted under endpoint and answered with errors in f's
	// shape.
	Call(c echo.Context, f *Format, endpoint string, r *upstream.Request) error
	// Models are the model names the configured routes list.
	Models() []string
	// Logger is the request's logger.
	Logger(c echo.Context) *slog.Logger
	// StoreMaxTokens reports whether answers cut by the output-token limit
	// may be stored (proxy.Options.StoreMaxTokens).
	StoreMaxTokens() bool
}
