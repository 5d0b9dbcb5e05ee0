package qdrant

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxBatch bounds the points in one Upsert request so a large flush stays
// well under gRPC's 4 MiB default message size (bodies can be tens of KiB).
const maxBatch = 64

// PointID is the Qdrant point ID of the entry stored under key: the first 16
// bytes of SHA-256(key) as an RFC 9562 version-8 UUID. Every replica derives
// the same ID, so Get by exact key sees entries written by any of them.
func PointID(key string) string {
	sum := sha256.Sum256([]byte(key))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8: custom
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Upsert stores items with wait=true, so a returned nil means every replica
// can read them. Items are sent in batches of up to maxBatch points.
func (ix *Index) Upsert(ctx context.Context, items []cache.IndexItem) error {
	if err := ix.usable(); err != nil {
		return err
	}
	pts := make([]*qdrant.PointStruct, 0, len(items))
	for _, it := range items {
		if it.Entry.Key == "" {
			return fmt.Errorf("upsert points: entry without key")
		}
		if got, want := len(it.Vector), ix.opts.Dimension; got != want {
			return fmt.Errorf("upsert points: vector of %d dimensions, index has %d: %w", got, want, cache.ErrDimension)
		}
		pts = append(pts, &qdrant.PointStruct{
			Id:      qdrant.NewIDUUID(PointID(it.Entry.Key)),
			Vectors: qdrant.NewVectorsDense(it.Vector),
			Payload: encodePayload(&it.Entry),
		})
	}
	for len(pts) > 0 {
		n := min(len(pts), maxBatch)
		cctx, cancel := ix.call(ctx)
		_, err := ix.points.Upsert(cctx, &qdrant.UpsertPoints{
			CollectionName: ix.opts.Collection,
			Wait:           qdrant.PtrOf(true),
			Points:         pts[:n],
		})
		cancel()
		if err != nil {
			ix.observe(err)
			return fmt.Errorf("upsert points: %w", err)
		}
		pts = pts[n:]
	}
	return nil
}

// Search runs one filtered nearest-neighbour query. The partition,
// fingerprint and expiry filters are applied by Qdrant and checked again
// here, so a server that ignored a filter could not leak another tenant's
// entry.
func (ix *Index) Search(ctx context.Context, q cache.SearchQuery) ([]cache.Match, error) {
	if err := ix.usable(); err != nil {
		return nil, err
	}
	if got, want := len(q.Vector), ix.opts.Dimension; got != want {
		return nil, fmt.Errorf("search points: vector of %d dimensions, index has %d: %w", got, want, cache.ErrDimension)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 1
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	res, err := ix.points.Query(cctx, &qdrant.QueryPoints{
		CollectionName: ix.opts.Collection,
		Query:          qdrant.NewQueryDense(q.Vector),
		Filter:         searchFilter(q.Partition, q.Fingerprint, now),
		ScoreThreshold: qdrant.PtrOf(q.Threshold),
		Limit:          qdrant.PtrOf(uint64(limit)),
		WithPayload:    qdrant.NewWithPayload(true),
	})
	if err != nil {
		ix.observe(err)
		return nil, fmt.Errorf("search points: %w", err)
	}
	out := make([]cache.Match, 0, len(res.GetResult()))
	for _, p := range res.GetResult() {
		e, err := decodePayload(p.GetPayload())
		if err != nil {
			return nil, fmt.Errorf("search points: %w", err)
		}
		if e.Partition != q.Partition || e.Fingerprint != q.Fingerprint || e.Expired(now) || p.GetScore() < q.Threshold {
			continue
		}
		out = append(out, cache.Match{Entry: e, Score: p.GetScore()})
	}
	return out, nil
}

// searchFilter selects the unexpired points of one partition and context.
// Expiry is compared in milliseconds: a point is kept when
// ceil(expires) > floor(now), a superset of the exact test, which Search
// repeats on the decoded entry.
func searchFilter(partition, fingerprint string, now time.Time) *qdrant.Filter {
	return &qdrant.Filter{
		Must: []*qdrant.Condition{
			qdrant.NewMatchKeyword("partition", partition),
			qdrant.NewMatchKeyword("fingerprint", fingerprint),
		},
		Should: []*qdrant.Condition{
			qdrant.NewRange("expires", &qdrant.Range{Gt: qdrant.PtrOf(float64(now.UnixMilli()))}),
			qdrant.NewMatchInt("expires", 0),
		},
	}
}

// Get reads the point of key by ID. A point whose payload key differs (an
// ID collision, 2^-122 per pair) or that has expired is a miss.
func (ix *Index) Get(ctx context.Context, key string) (cache.Entry, bool, error) {
	if err := ix.usable(); err != nil {
		return cache.Entry{}, false, err
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	res, err := ix.points.Get(cctx, &qdrant.GetPoints{
		CollectionName: ix.opts.Collection,
		Ids:            []*qdrant.PointId{qdrant.NewIDUUID(PointID(key))},
		WithPayload:    qdrant.NewWithPayload(true),
		WithVectors:    qdrant.NewWithVectors(false),
	})
	if err != nil {
		ix.observe(err)
		return cache.Entry{}, false, fmt.Errorf("get point: %w", err)
	}
	for _, p := range res.GetResult() {
		e, err := decodePayload(p.GetPayload())
		if err != nil {
			return cache.Entry{}, false, fmt.Errorf("get point: %w", err)
		}
		if e.Key == key && !e.Expired(time.Now()) {
			return e, true, nil
		}
	}
	return cache.Entry{}, false, nil
}

// DeletePartition deletes the points of partition by filter. "" deletes every
// point of the collection with an empty filter (which matches all points)
// rather than dropping the collection: other replicas keep using it, and
// its payload indexes and metadata stay. It then writes a flush record that
// the other replicas read (flushes.go).
func (ix *Index) DeletePartition(ctx context.Context, partition string) error {
	f := &qdrant.Filter{}
	if partition != "" {
		f.Must = []*qdrant.Condition{qdrant.NewMatchKeyword("partition", partition)}
	}
	if err := ix.deleteByFilter(ctx, f); err != nil {
		return fmt.Errorf("delete partition: %w", err)
	}
	// After the delete: a replica that drops its exact copies on reading the
	// record must not refill them from points still there.
	if err := ix.recordFlush(ctx, partition); err != nil {
		return fmt.Errorf("delete partition: %w", err)
	}
	return nil
}

// Sweep deletes points whose expiry has passed. The background loop calls it
// every Options.SweepEvery; search and get never return expired entries
// whether or not it has run.
func (ix *Index) Sweep(ctx context.Context) error {
	now := float64(time.Now().UnixMilli())
	f := &qdrant.Filter{Must: []*qdrant.Condition{
		// expires == 0 means never; ceil(expires) <= floor(now) implies expired.
		qdrant.NewRange("expires", &qdrant.Range{Gt: qdrant.PtrOf(0.0), Lte: &now}),
	}}
	if err := ix.deleteByFilter(ctx, f); err != nil {
		return fmt.Errorf("sweep expired points: %w", err)
	}
	return nil
}

func (ix *Index) deleteByFilter(ctx context.Context, f *qdrant.Filter) error {
	if err := ix.usable(); err != nil {
		return err
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	_, err := ix.points.Delete(cctx, &qdrant.DeletePoints{
		CollectionName: ix.opts.Collection,
		Wait:           qdrant.PtrOf(true),
		Points:         qdrant.NewPointsSelectorFilter(f),
	})
	ix.observe(err)
	return err
}

// Len counts the entries of the collection exactly (not the flush and owner
// records).
func (ix *Index) Len(ctx context.Context) (int, error) {
	if err := ix.usable(); err != nil {
		return 0, err
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	res, err := ix.points.Count(cctx, &qdrant.CountPoints{
		CollectionName: ix.opts.Collection,
		Filter:         &qdrant.Filter{MustNot: []*qdrant.Condition{qdrant.NewMatchKeywords("kind", "flush", "owner")}},
		Exact:          qdrant.PtrOf(true),
	})
	if err != nil {
		ix.observe(err)
		return 0, fmt.Errorf("count points: %w", err)
	}
	return int(res.GetResult().GetCount()), nil
}

func encodePayload(e *cache.Entry) map[string]*qdrant.Value {
	p := map[string]*qdrant.Value{
		"key":         qdrant.NewValueString(e.Key),
		"partition":   qdrant.NewValueString(e.Partition),
		"fingerprint": qdrant.NewValueString(e.Fingerprint),
		"query":       qdrant.NewValueString(e.Query),
		"model":       qdrant.NewValueString(e.Model),
		"body":        qdrant.NewValueString(base64.StdEncoding.EncodeToString(e.Body)),
		"created":     qdrant.NewValueInt(millisFloor(e.Created)),
		"expires":     qdrant.NewValueInt(millisCeil(e.Expires)),
	}
	// The end user (a keyed hash) and agreement: absent for the anonymous
	// user, as on points written before they were kept, which read back
	// the same.
	if e.User != "" {
		p["user"] = qdrant.NewValueString(e.User)
	}
	if e.Agreed {
		p["agreed"] = qdrant.NewValueBool(true)
	}
	if ns, ok := nanos(e.Created); ok {
		p["created_ns"] = qdrant.NewValueInt(ns)
	}
	if ns, ok := nanos(e.Expires); ok {
		p["expires_ns"] = qdrant.NewValueInt(ns)
	}
	return p
}

func decodePayload(p map[string]*qdrant.Value) (cache.Entry, error) {
	body, err := base64.StdEncoding.DecodeString(p["body"].GetStringValue())
	if err != nil {
		return cache.Entry{}, fmt.Errorf("decode body of %q: %w", p["key"].GetStringValue(), err)
	}
	return cache.Entry{
		Key:         p["key"].GetStringValue(),
		Partition:   p["partition"].GetStringValue(),
		Fingerprint: p["fingerprint"].GetStringValue(),
		Query:       p["query"].GetStringValue(),
		Model:       p["model"].GetStringValue(),
		User:        p["user"].GetStringValue(),
		Agreed:      p["agreed"].GetBoolValue(),
		Body:        body,
		Created:     decodeTime(p["created_ns"], p["created"]),
		Expires:     decodeTime(p["expires_ns"], p["expires"]),
	}, nil
}

// nanos is t in unix nanoseconds when that fits an int64 (1678–2262).
func nanos(t time.Time) (int64, bool) {
	if t.IsZero() {
		return 0, false
	}
	ns := t.UnixNano()
	return ns, time.Unix(0, ns).Equal(t)
}

func millisFloor(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// millisCeil rounds up so that an entry is never filtered out before it
// expires; 0 stays "never".
func millisCeil(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 && ms < math.MaxInt64 {
		ms++
	}
	if ms == 0 { // the epoch itself; keep it distinct from "never"
		ms = -1
	}
	return ms
}

func decodeTime(ns, ms *qdrant.Value) time.Time {
	if ns != nil {
		return time.Unix(0, ns.GetIntegerValue())
	}
	if v := ms.GetIntegerValue(); v != 0 {
		return time.UnixMilli(v)
	}
	return time.Time{}
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
