package flow

import (
	"context"
	"net/http"
	"sync"
	"time"
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

// OwnerScope is the partition of the client whose request carries h, the
// scope of its shared owner records.
func (s *Flow) OwnerScope(h http.Header) string {
	if s.opts.Partitioner == nil {
		return ""
	}
	return s.opts.Partitioner.Partition(h)
}

// addOwner remembers that upstream up created id, in answer to a request
// with headers h, here and, with Options.SharedOwners, for the other
// replicas.
func (s *Flow) addOwner(h http.Header, id, up string) {
	if id == "" || len(id) > maxResponseIDBytes || up == "" {
		return
	}
	s.owners.add(id, up)
	if s.opts.SharedOwners != nil {
		s.shareOwner(s.OwnerScope(h), id, up)
	}
}

// shareOwner writes id's owner to Options.SharedOwners for the tenant scope.
func (s *Flow) shareOwner(scope, id, up string) {
	ctx, cancel := context.WithTimeout(context.Background(), ownerStoreTimeout)
	defer cancel()
	if err := s.opts.SharedOwners.PutOwner(ctx, scope, id, up); err != nil {
		s.log.Debug("responses id not shared with the other replicas", "upstream", up, "err", err)
	}
}

// LookupOwner is the upstream that created id: from this process's
// registry, else from Options.SharedOwners for the tenant of the request
// with headers h. What the store answers is not copied into the registry,
// which is not scoped by tenant: another tenant naming the id here must not
// be routed by it. A follow-up reaching a replica that did not create its
// id costs one store read (one Qdrant point read) each time.
func (s *Flow) LookupOwner(h http.Header, id string) (string, bool) {
	if up, ok := s.owners.lookup(id); ok {
		return up, true
	}
	if s.opts.SharedOwners == nil || id == "" || len(id) > maxResponseIDBytes {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownerStoreTimeout)
	defer cancel()
	up, ok, err := s.opts.SharedOwners.Owner(ctx, s.OwnerScope(h), id)
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
		r.gauge(len(r.owner))
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
func (s *Flow) learnOwner(h http.Header, f Format, status int, body []byte, upstreamName string) {
	if f.ResponseID == nil || status < 200 || status > 299 {
		return
	}
	s.addOwner(h, f.ResponseID(body), upstreamName)
}

// AddOwner remembers that upstream up created id, here and, with
// Options.SharedOwners, for the other replicas in the tenant scope ("" with
// no scope known: here only). The pass-through learns the ids of creates it
// forwarded this way.
func (s *Flow) AddOwner(scope string, hasScope bool, id, up string) {
	if id == "" || len(id) > maxResponseIDBytes || up == "" {
		return
	}
	s.owners.add(id, up)
	if hasScope && s.opts.SharedOwners != nil {
		s.shareOwner(scope, id, up)
	}
}

// MaxResponseIDBytes: longer Responses ids are not remembered.
const MaxResponseIDBytes = maxResponseIDBytes
