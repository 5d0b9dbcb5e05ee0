package cache

import (
	"context"
	"errors"
	"time"
)

// Entry is one cached answer.
type Entry struct {
	// Key is the exact key (hex SHA-256) the entry was stored under. In a
	// vector index it is also the point's identity: upserting the same Key
	// replaces the earlier record.
	Key string
	// Partition says who may read the entry (see Partition). Never empty
	// except in the explicit shared mode, where it is "shared".
	Partition string
	// Fingerprint is the context fingerprint (see Fingerprint); semantic
	// search only compares entries whose Partition and Fingerprint both match.
	Fingerprint string
	// Query is the text that was embedded (the final user turn); the guard
	// compares it with the query of a later request.
	Query string
	// Model is the upstream model that produced the answer.
	Model string
	// User is the keyed hash of the end user whose request created the
	// entry (EndUserHash; never the identity itself), "" for a request
	// without one: every such request of a partition is one anonymous user.
	// Entries stored before end users were read have "". The semantic tier
	// serves an entry to another end user only as Options.CrossUser allows.
	User string
	// Agreed marks an entry whose answer was agreed independently: it was
	// stored by a second end user's miss whose fresh answer was the same as
	// the answer of another user's candidate the scope had refused. Under
	// CrossUserAgreed it may be served to every end user of the partition.
	Agreed bool
	// Body is the response body as the client received it (completion JSON).
	Body []byte
	// Created is when the upstream answered; Expires is when the entry stops
	// being served. A zero Expires never expires.
	Created time.Time
	Expires time.Time
	// Wire, when set, is a ready-to-write form of Body prepared by whoever
	// stored the entry (the proxy keeps where the fields it rewrites per
	// answer are). The exact tier keeps it with the entry, promotion copies
	// it, and nothing in this package reads it; indexes do not store it.
	Wire any
}

// Expired reports whether e must no longer be served at now.
func (e *Entry) Expired(now time.Time) bool {
	return !e.Expires.IsZero() && !now.Before(e.Expires)
}

// Size is the approximate number of bytes e occupies, used to bound caches.
func (e *Entry) Size() int64 {
	return int64(len(e.Key)+len(e.Partition)+len(e.Fingerprint)+len(e.Query)+len(e.Model)+len(e.User)+len(e.Body)) + 64
}

// IndexItem is an entry with the vector of its Query.
type IndexItem struct {
	Entry  Entry
	Vector []float32
}

// SearchQuery is one nearest-neighbour search.
type SearchQuery struct {
	// Partition and Fingerprint are hard filters: only entries with both equal
	// are candidates. Both are required.
	Partition   string
	Fingerprint string
	// Vector is the L2-normalised query vector.
	Vector []float32
	// Threshold is the minimum cosine similarity of a result, in [0,1].
	Threshold float32
	// Limit is the maximum number of results; zero means 1.
	Limit int
	// Now excludes entries that have expired at Now; zero means time.Now().
	Now time.Time
}

// Match is one search result.
type Match struct {
	Entry Entry
	// Score is the cosine similarity between the query and the entry's vector.
	Score float32
}

// Index is the semantic tier's vector store. Implementations must be safe for
// concurrent use. The contract suite in cache/indextest checks every
// implementation against this description.
type Index interface {
	// Upsert stores items, replacing any earlier record with the same
	// Entry.Key. Vectors must have the index's dimension.
	Upsert(ctx context.Context, items []IndexItem) error
	// Search returns at most q.Limit matches with Score >= q.Threshold, best
	// first, only among unexpired entries of q.Partition and q.Fingerprint.
	Search(ctx context.Context, q SearchQuery) ([]Match, error)
	// Get returns the unexpired entry stored under the exact key, if any.
	Get(ctx context.Context, key string) (Entry, bool, error)
	// DeletePartition removes every entry of partition; "" removes all.
	DeletePartition(ctx context.Context, partition string) error
	// Len returns the number of stored (possibly expired, not yet removed) entries.
	Len(ctx context.Context) (int, error)
	// Close flushes and releases the index. It is safe to call twice.
	Close() error
}

// ErrDimension is returned (wrapped) when a vector's length does not match
// the index, or when an existing store was built for another dimension.
var ErrDimension = errors.New("vector dimension mismatch")

// ErrEmbedderMismatch is returned (wrapped) when an existing store was built
// by a different embedder than the one the index was opened with.
var ErrEmbedderMismatch = errors.New("store built by a different embedder")

// SharedIndex is an Index other processes write to and flush too (Qdrant).
// The cache calls WatchFlushes once the index is open, with a function that
// drops a partition ("" for all) from this process's exact tier and write
// queue: another replica's flush deletes the entries from the shared index,
// and without it this process's exact tier would keep serving them.
type SharedIndex interface {
	Index
	WatchFlushes(apply func(partition string))
}
