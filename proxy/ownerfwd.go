package proxy

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// The pass-through side of the Responses ids' owners (the registry itself
// is the flow's, proxy/flow/owners.go): a forwarder per upstream for the
// requests naming an id, and the ids of creates passed through.

// PassthroughTarget is one upstream's pass-through root (including /v1) and
// credential: Key, when set, replaces the client's credential headers, sent
// in the Auth style (upstream.AuthBearer when ""); empty forwards the
// client's headers as sent.
type PassthroughTarget struct {
	Root      *url.URL
	Key, Auth string
}

// ownerScopeKey carries a passed-through request's ownerScope in its
// context.
type ownerScopeKey struct{}

// ownerOf is the upstream that created the response id, when this process
// saw it created and has a pass-through target for that upstream.
func (s *Server) ownerOf(h http.Header, id string) (string, bool) {
	up, ok := s.flow.Owners().Lookup(h, id)
	if !ok {
		return "", false
	}
	_, ok = s.ownerFwd[up]
	return up, ok
}

// newOwnerForwarders builds one reverse proxy per upstream, once.
func (s *Server) newOwnerForwarders(targets map[string]PassthroughTarget) map[string]*httputil.ReverseProxy {
	out := make(map[string]*httputil.ReverseProxy, len(targets))
	for name, t := range targets {
		if t.Root == nil {
			continue
		}
		fwd := s.newForwarder(t.Root, t.Key, t.Auth)
		fwd.ErrorHandler = s.passthroughFailed("upstream " + name)
		fwd.ModifyResponse = func(resp *http.Response) error {
			s.learnPassedThrough(resp, name)
			return nil
		}
		out[name] = fwd
	}
	return out
}

// forwardToOwner passes the request through to upstream up, one of
// s.ownerFwd's.
func (s *Server) forwardToOwner(c echo.Context, up string) error {
	// As handleForward: a key never travels in a URL that may be logged.
	if err := s.sanitize(c.Request()); err != nil {
		return writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	if s.log.Enabled(c.Request().Context(), slog.LevelDebug) {
		s.logger(c).Debug("answer id routed to its upstream", "upstream", up)
	}
	if s.opts.SharedOwners != nil {
		// learnPassedThrough shares an id created here for this client's
		// tenant.
		r := c.Request()
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), ownerScopeKey{}, s.flow.Owners().Scope(r.Header))))
	}
	h := c.Response().Header()
	h.Set(HeaderCache, OutcomeBypass)
	h.Set(HeaderUpstream, up)
	s.countBypass(c)
	s.ownerFwd[up].ServeHTTP(c.Response(), c.Request())
	return nil
}

// passthroughFailed answers a pass-through that reached no upstream, in the
// client's API shape, naming who did not answer.
func (s *Server) passthroughFailed(who string) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		s.log.Warn("pass-through failed", "request_id", r.Header.Get(HeaderRequestID), "path", r.URL.Path, "err", err)
		status, body := s.passthroughFormat(r.Header).Error(http.StatusBadGateway, "upstream_unreachable", "breakwater: "+who+" did not answer")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// maxLearnBytes bounds what is read ahead of the client from a passed-through
// create's answer to learn its id: a background response is answered
// queued, without output, in a few KB.
const maxLearnBytes = 1 << 20

// learnPassedThrough remembers the id of a response created through a
// pass-through to upstream up (a background request continuing one of its
// responses), before the answer goes on to the client. Only a JSON answer
// within maxLearnBytes (gzip-encoded or not) is read; a streamed one is
// relayed untouched and its id stays unknown.
func (s *Server) learnPassedThrough(resp *http.Response, up string) {
	req := resp.Request
	if req == nil || req.Method != http.MethodPost || !s.createsIDs(req.URL.Path) ||
		resp.StatusCode < 200 || resp.StatusCode > 299 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxLearnBytes+1))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil || len(head) > maxLearnBytes {
		return
	}
	body := head
	switch resp.Header.Get("Content-Encoding") {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(head))
		if err != nil {
			return
		}
		body, err = io.ReadAll(io.LimitReader(zr, maxLearnBytes))
		if err != nil {
			return
		}
	default:
		return
	}
	id := s.passedThroughID(req, body)
	// The outgoing request may carry the upstream's key instead of the
	// client's: the scope was taken from the client's request
	// (forwardToOwner).
	scope, ok := req.Context().Value(ownerScopeKey{}).(string)
	s.flow.Owners().AddScoped(scope, ok, id, up)
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// noteIDFormat keeps f when its answers carry ids a later request may name
// (wire.Format.ResponseID): a create passed through to an upstream teaches the
// id's owner too.
func (s *Server) noteIDFormat(f Format) {
	if f == nil || f.ResponseID == nil {
		return
	}
	for _, g := range s.idFormats {
		if g.Endpoint == f.Endpoint {
			return
		}
	}
	s.idFormats = append(s.idFormats, f)
}

// createsIDs reports whether a request passed through on path creates an
// answer with an id: a POST to the endpoint of an ids' Format (the path
// after the API version, as an upstream root may hold its own version).
func (s *Server) createsIDs(path string) bool {
	return s.idFormatOf(path) != nil
}

func (s *Server) idFormatOf(path string) Format {
	for _, f := range s.idFormats {
		if rest, _ := upstream.CutAPIVersion(f.Endpoint); strings.HasSuffix(path, rest) {
			return f
		}
	}
	return nil
}

// passedThroughID is the id of the answer body to a create passed through.
func (s *Server) passedThroughID(req *http.Request, body []byte) string {
	if f := s.idFormatOf(req.URL.Path); f != nil {
		return f.ResponseID(body)
	}
	return ""
}
