package flow

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
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultResponseOwners is how many Responses ids the proxy remembers the
// upstream of (Options.ResponseOwners). A response is stored by the provider
// account that created it, and only that account knows its id
// (https://platform.openai.com/docs/guides/conversation-state): retrieval,
// deletion, cancellation and the next turn's previous_response_id must go
// back there. Past the bound the oldest ids are forgotten first; a forgotten
// (or never seen) id keeps the routing it had without the registry. An entry
// is an id (at most maxResponseIDBytes) and a shared upstream name: 100,000
// of them take 13.5 MB of heap with OpenAI's 53-byte ids and 20 MB with
// 128-byte ones (docs/BENCHMARKS.md).
const DefaultResponseOwners = 100_000

// maxResponseIDBytes: longer ids are not remembered. OpenAI's are "resp_"
// and about 50 hex digits; the bound keeps a compatible server's odd ids
// from growing the registry's memory beyond its documented size.
const maxResponseIDBytes = 128

// PassthroughTarget is one upstream's pass-through root (including /v1) and
// credential: Key, when set, replaces the client's credential headers, sent
// in the Auth style (upstream.AuthBearer when ""); empty forwards the
// client's headers as sent.
type PassthroughTarget struct {
	Root      *url.URL
	Key, Auth string
}

// OwnerStore keeps Responses ids' owners for every replica of a fleet
// (cache/qdrant's Index implements it). Both calls are bounded by the
// proxy (ownerStoreTimeout); a failure leaves the id unknown, which keeps the
// routing it has without the registry.
//
// Records are scoped by the client's cache partition (the HMAC of its
// credential, cache.Partitioner; "" with the cache off): a replica answers
// an id only to the tenant whose request created it, so no tenant learns,
// or is routed by, another tenant's ids.
type OwnerStore interface {
	PutOwner(ctx context.Context, scope, id, upstream string) error
	Owner(ctx context.Context, scope, id string) (upstream string, ok bool, err error)
}

// ownerStoreTimeout bounds each OwnerStore call. A write is made before the
// answer reaches its client (who may send the id to another replica at
// once), so this is at most what an unreachable store adds to a Responses
// miss, whose upstream call takes seconds.
const ownerStoreTimeout = 250 * time.Millisecond

// ownerScopeKey carries a passed-through request's ownerScope in its
// context.
type ownerScopeKey struct{}

// ownerScope is the partition of the client whose request carries h, the
// scope of its shared owner records.
func (s *Server) ownerScope(h http.Header) string {
	if s.opts.Partitioner == nil {
		return ""
	}
	return s.opts.Partitioner.Partition(h)
}

// addOwner remembers that upstream up created id, in answer to a request
// with headers h, here and, with Options.SharedOwners, for the other
// replicas.
func (s *Server) addOwner(h http.Header, id, up string) {
	if id == "" || len(id) > maxResponseIDBytes || up == "" {
		return
	}
	s.owners.add(id, up)
	if s.opts.SharedOwners != nil {
		s.shareOwner(s.ownerScope(h), id, up)
	}
}

// shareOwner writes id's owner to Options.SharedOwners for the tenant scope.
func (s *Server) shareOwner(scope, id, up string) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerStoreTimeout)
	defer cancel()
	if err := s.opts.SharedOwners.PutOwner(ctx, scope, id, up); err != nil {
		s.log.Debug("responses id not shared with the other replicas", "upstream", up, "err", err)
	}
}

// lookupOwner is the upstream that created id: from this process's
// registry, else from Options.SharedOwners for the tenant of the request
// with headers h. What the store answers is not copied into the registry,
// which is not scoped by tenant: another tenant naming the id here must not
// be routed by it. A follow-up reaching a replica that did not create its
// id costs one store read (one Qdrant point read) each time.
func (s *Server) lookupOwner(h http.Header, id string) (string, bool) {
	if up, ok := s.owners.lookup(id); ok {
		return up, true
	}
	if s.opts.SharedOwners == nil || id == "" || len(id) > maxResponseIDBytes {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownerStoreTimeout)
	defer cancel()
	up, ok, err := s.opts.SharedOwners.Owner(ctx, s.ownerScope(h), id)
	if err != nil || !ok || up == "" {
		return "", false
	}
	return up, true
}

// responseOwners maps a Responses id to the upstream that created it. It is
// per process; Options.SharedOwners shares the ids between replicas, with
// this map as the first, cheap look-up. Safe for concurrent use; add and lookup are O(1).
type responseOwners struct {
	mu    sync.Mutex
	limit int
	owner map[string]string
	ring  []string // ids in insertion order from next, wrapping; grows up to limit
	next  int      // the oldest id's slot once the ring is full
	gauge prometheus.Gauge
}

func newResponseOwners(limit int, gauge prometheus.Gauge) *responseOwners {
	if limit <= 0 {
		limit = DefaultResponseOwners
	}
	return &responseOwners{limit: limit, owner: make(map[string]string), gauge: gauge}
}

// add remembers that upstream created id. An empty or over-long id, or an
// empty upstream, is ignored; an id already known keeps its place and takes
// the new upstream.
func (r *responseOwners) add(id, upstream string) {
	if id == "" || len(id) > maxResponseIDBytes || upstream == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.owner[id]; ok {
		r.owner[id] = upstream
		return
	}
	if len(r.ring) < r.limit {
		r.ring = append(r.ring, id)
	} else {
		delete(r.owner, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % r.limit
	}
	r.owner[id] = upstream
	if r.gauge != nil {
		r.gauge.Set(float64(len(r.owner)))
	}
}

// lookup returns the upstream that created id, if it is known.
func (r *responseOwners) lookup(id string) (string, bool) {
	if id == "" || len(id) > maxResponseIDBytes {
		return "", false
	}
	r.mu.Lock()
	up, ok := r.owner[id]
	r.mu.Unlock()
	return up, ok
}

// size is how many ids are known.
func (r *responseOwners) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.owner)
}

// learnOwner remembers the upstream of an answer's response id, for a Format
// whose answers have one. Called once per upstream call (inside the call a
// coalesced flight shares), before the answer reaches any client, so a client
// that sends the id back at once finds it known.
func (s *Server) learnOwner(h http.Header, f Format, status int, body []byte, upstreamName string) {
	if f.ResponseID == nil || status < 200 || status > 299 {
		return
	}
	s.addOwner(h, f.ResponseID(body), upstreamName)
}

// ownerOf is the upstream that created the response id, when this process
// saw it created and has a pass-through target for that upstream.
func (s *Server) ownerOf(h http.Header, id string) (string, bool) {
	up, ok := s.lookupOwner(h, id)
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
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), ownerScopeKey{}, s.ownerScope(r.Header))))
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
	if id == "" || len(id) > maxResponseIDBytes {
		return
	}
	s.owners.add(id, up)
	// The outgoing request may carry the upstream's key instead of the
	// client's: the scope was taken from the client's request
	// (forwardToOwner).
	if scope, ok := req.Context().Value(ownerScopeKey{}).(string); ok && s.opts.SharedOwners != nil {
		s.shareOwner(scope, id, up)
	}
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
