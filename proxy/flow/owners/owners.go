// Package owners remembers which upstream created each Responses id, per
// process and, with a Store, for every replica of a fleet, scoped by the
// tenant whose request created it.
package owners

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// DefaultResponseOwners is how many Responses ids the proxy remembers the
// upstream of (Options.ResponseOwners). A response is stored by the provider
// account that created it, and only that account knows its id
// (https://platform.openai.com/docs/guides/conversation-state): retrieval,
// deletion, cancellation and the next turn's previous_response_id must go
// back there. Past the bound the oldest ids are forgotten first; a forgotten
// (or never seen) id keeps the routing it had without the registry. An entry
// is an id (at most MaxIDBytes) and a shared upstream name: 100,000
// of them take 13.5 MB of heap with OpenAI's 53-byte ids and 20 MB with
// 128-byte ones (docs/BENCHMARKS.md).
const DefaultResponseOwners = 100_000

// MaxIDBytes: longer ids are not remembered. OpenAI's are "resp_"
// and about 50 hex digits; the bound keeps a compatible server's odd ids
// from growing the registry's memory beyond its documented size.
const MaxIDBytes = 128

// Store keeps Responses ids' owners for every replica of a fleet
// (cache/qdrant's Index implements it). Both calls are bounded by the
// proxy (storeTimeout); a failure leaves the id unknown, which keeps the
// routing it has without the registry.
//
// Records are scoped by the client's cache partition (the HMAC of its
// credential, cache.Partitioner; "" with the cache off): a replica answers
// an id only to the tenant whose request created it, so no tenant learns,
// or is routed by, another tenant's ids.
type Store interface {
	PutOwner(ctx context.Context, scope, id, upstream string) error
	Owner(ctx context.Context, scope, id string) (upstream string, ok bool, err error)
}

// storeTimeout bounds each OwnerStore call. A write is made before the
// answer reaches its client (who may send the id to another replica at
// once), so this is at most what an unreachable store adds to a Responses
// miss, whose upstream call takes seconds.
const storeTimeout = 250 * time.Millisecond

// Registry is the ids' owners: a bounded map of this process's, and the
// fleet's Store when there is one.
type Registry struct {
	ids   *responseOwners
	store Store              // nil: this process only
	parts *cache.Partitioner // the tenants' scopes; nil: one scope
	log   *slog.Logger
}

// New builds a Registry of at most limit ids (zero: DefaultResponseOwners)
// sharing them through store (nil: none), scoped by the partitions of p
// (nil: one scope), telling gauge its size on every change (nil: nobody).
func New(limit int, store Store, p *cache.Partitioner, gauge func(n int), log *slog.Logger) *Registry {
	if log == nil {
		log = slog.Default()
	}
	return &Registry{ids: newResponseOwners(limit, gauge), store: store, parts: p, log: log}
}

// Size is how many ids this process remembers.
func (s *Registry) Size() int { return s.ids.size() }

// Scope is the partition of the client whose request carries h, the
// scope of its shared owner records.
func (s *Registry) Scope(h http.Header) string {
	if s.parts == nil {
		return ""
	}
	return s.parts.Partition(h)
}

// Add remembers that upstream up created id, in answer to a request with
// headers h, here and, with a Store, for the other replicas.
func (s *Registry) Add(h http.Header, id, up string) {
	s.AddScoped(s.Scope(h), true, id, up)
}

// AddScoped is Add for the tenant scope, shared with the other replicas
// only when hasScope (the pass-through's outgoing request may carry the
// upstream's key instead of the client's: its scope is taken from the
// client's request, when there was one).
func (s *Registry) AddScoped(scope string, hasScope bool, id, up string) {
	if id == "" || len(id) > MaxIDBytes || up == "" {
		return
	}
	s.ids.add(id, up)
	if hasScope && s.store != nil {
		s.share(scope, id, up)
	}
}

// share writes id's owner to the Store for the tenant scope.
func (s *Registry) share(scope, id, up string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := s.store.PutOwner(ctx, scope, id, up); err != nil {
		s.log.Debug("responses id not shared with the other replicas", "upstream", up, "err", err)
	}
}

// Lookup is the upstream that created id: from this process's
// registry, else from Options.SharedOwners for the tenant of the request
// with headers h. What the store answers is not copied into the registry,
// which is not scoped by tenant: another tenant naming the id here must not
// be routed by it. A follow-up reaching a replica that did not create its
// id costs one store read (one Qdrant point read) each time.
func (s *Registry) Lookup(h http.Header, id string) (string, bool) {
	if up, ok := s.ids.lookup(id); ok {
		return up, true
	}
	if s.store == nil || id == "" || len(id) > MaxIDBytes {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	up, ok, err := s.store.Owner(ctx, s.Scope(h), id)
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
	ring  []string    // ids in insertion order from next, wrapping; grows up to limit
	next  int         // the oldest id's slot once the ring is full
	gauge func(n int) // told the size on every change; nil: nobody
}

func newResponseOwners(limit int, gauge func(n int)) *responseOwners {
	if limit <= 0 {
		limit = DefaultResponseOwners
	}
	return &responseOwners{limit: limit, owner: make(map[string]string), gauge: gauge}
}

// add remembers that upstream created id. An empty or over-long id, or an
// empty upstream, is ignored; an id already known keeps its place and takes
// the new upstream.
func (r *responseOwners) add(id, upstream string) {
	if id == "" || len(id) > MaxIDBytes || upstream == "" {
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
		r.gauge(len(r.owner))
	}
}

// lookup returns the upstream that created id, if it is known.
func (r *responseOwners) lookup(id string) (string, bool) {
	if id == "" || len(id) > MaxIDBytes {
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
