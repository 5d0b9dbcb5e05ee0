package proxy

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/flow"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// mountedAPI is one registered wire API as this server serves it.
type mountedAPI struct {
	wire.API
	// home is the upstream its requests for a model no route lists go to
	// (Options.APIUpstreams; "" = the default upstream).
	home string
}

// mountAPIs registers every API's routes on e, in the order given. The first
// API without a Claims is the default one, whose error shape unclaimed
// requests get.
func (s *Server) mountAPIs(e *echo.Echo, apis []wire.API) error {
	seen := make(map[string]bool, len(apis))
	for _, api := range apis {
		if api.Name == "" || seen[api.Name] {
			return errorf("new proxy: API %q: every registered API needs a name of its own", api.Name)
		}
		seen[api.Name] = true
		a := &mountedAPI{API: api, home: s.opts.APIUpstreams[api.Name]}
		s.apis = append(s.apis, a)
		if s.defaultErrors == nil && api.Claims == nil && api.Errors != nil {
			s.defaultErrors = api.Errors
		}
		if api.Errors != nil {
			if err := api.Errors.Check(true); err != nil {
				return errorf("new proxy: API %q: Errors: %v", api.Name, err)
			}
		}
		h := &apiHost{s: s, a: a}
		s.noteIDFormat(api.Errors)
		for _, r := range api.Routes {
			var handler echo.HandlerFunc
			var mw []echo.MiddlewareFunc
			switch {
			case r.Format != nil:
				if err := r.Format.Check(false); err != nil {
					return errorf("new proxy: API %q: route %s %s: %v", api.Name, r.Method, r.Path, err)
				}
				s.noteIDFormat(r.Format)
				handler = s.serveFormat(r.Format, a.home)
				mw = append(mw, s.bodyBudget)
			case r.Handler != nil:
				handler = h.wrap(h.yield(r.Yield, r.Handler(h)))
				if r.Budget {
					mw = append(mw, s.bodyBudget)
				}
			default:
				return errorf("new proxy: API %q: route %s %s has neither a Format nor a Handler", api.Name, r.Method, r.Path)
			}
			// Composed once here: echo applies a route's middleware anew on
			// every request (one closure each), and modelRoute is the
			// outermost, so that a 503 of the body budget is counted too.
			for i := len(mw) - 1; i >= 0; i-- {
				handler = mw[i](handler)
			}
			handler = s.modelRoute(handler)
			if r.Method == "" {
				e.Any(r.Path, handler)
			} else {
				e.Add(r.Method, r.Path, handler)
			}
		}
	}
	for name := range s.opts.APIUpstreams {
		if !seen[name] {
			return errorf("new proxy: APIUpstreams names %q, which is no registered API", name)
		}
	}
	if s.defaultErrors == nil {
		return errorf("new proxy: no registered API without a Claims (the default API) gives an error shape")
	}
	return nil
}

// sanitize runs every registered API's Sanitize on a request about to be
// passed through.
func (s *Server) sanitize(r *http.Request) error {
	for _, a := range s.apis {
		if a.Sanitize != nil {
			if err := a.Sanitize(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// apiHost is the wire.Host of one registered API.
type apiHost struct {
	s *Server
	a *mountedAPI
}

// wrap makes the API's error shape that of the route until the handler
// picks a Format.
func (h *apiHost) wrap(next echo.HandlerFunc) echo.HandlerFunc {
	if h.a.Errors == nil {
		return next
	}
	return func(c echo.Context) error {
		c.Set(formatCtxKey, h.a.Errors)
		return next(c)
	}
}

// yield passes a request another API claims through (wire.Route.Yield).
func (h *apiHost) yield(yield bool, next echo.HandlerFunc) echo.HandlerFunc {
	if !yield {
		return next
	}
	return func(c echo.Context) error {
		if a := h.s.claimant(c.Request().Header); a != nil && a != h.a {
			return h.Forward(c, "")
		}
		return next(c)
	}
}

func (h *apiHost) Serve(c echo.Context, f Format) error {
	c.Set(formatCtxKey, f)
	return h.s.serveCached(c, f, h.a.home)
}

func (h *apiHost) Body(c echo.Context) ([]byte, bool, error) { return h.s.requestBody(c) }

func (h *apiHost) Error(c echo.Context, status int, code, message string) error {
	return writeError(c, status, code, message, 0)
}

// Forward sends the request to the owner of the answer id owned when it is
// known; else it answers errors in the shape of the API claiming the
// request, as the /v1/* catch-all does.
func (h *apiHost) Forward(c echo.Context, owned string) error {
	if owned != "" {
		if up, ok := h.s.ownerOf(c.Request().Header, owned); ok {
			return h.s.forwardToOwner(c, up)
		}
	}
	c.Set(formatCtxKey, nil)
	return h.s.handleForward(c)
}

func (h *apiHost) ForwardHome(c echo.Context) bool {
	fwd := h.s.ownerFwd[h.a.home]
	if h.a.home == "" || fwd == nil {
		return false
	}
	c.Response().Header().Set(HeaderCache, OutcomeBypass)
	h.s.countBypass(c)
	fwd.ServeHTTP(c.Response(), c.Request())
	return true
}

func (h *apiHost) Models() []string { return h.s.opts.Models }

func (h *apiHost) Logger(c echo.Context) *slog.Logger { return h.s.logger(c) }

func (h *apiHost) StoreMaxTokens() bool { return h.s.opts.StoreMaxTokens }

// Call sends an uncached request through the caller and relays its answer
// (flow.Flow.Call), its Record to the subscribers.
func (h *apiHost) Call(c echo.Context, f Format, endpoint string, ureq *upstream.Request) error {
	s := h.s
	c.Set(formatCtxKey, f)
	r := flow.Request{HTTP: c.Request(), ID: requestIDOf(c), Format: f, Home: h.a.home, Start: s.opts.Now()}
	rec, err := s.flow.Call(c.Response(), r, endpoint, ureq)
	if rec != nil {
		s.finished(c, rec)
	}
	return err
}
