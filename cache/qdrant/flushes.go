package qdrant

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/qdrant/go-client/qdrant"
)

// Flushes reach every replica through flush records: points in the
// collection itself (so nothing but the collection is shared), one per
// DeletePartition, with payload kind = "flush", "flushed" (the partition;
// "" for all), "by" (the writing Index) and "expires" (now +
// flushRecordTTL, so the expiry sweep removes them). Each record has a random
// ID: two replicas flushing at once write two records, where a single
// metadata key would keep only the last writer's. A record's vector is a
// fixed unit vector; it has no "partition" or "fingerprint", so no search
// or Get by key ever returns it.
//
// Every index polls the records every flushPollEvery and hands each record
// it has not seen and did not write to the function given to WatchFlushes,
// which drops that partition from the process's own exact tier: an exact
// tier otherwise keeps serving what another replica flushed from Qdrant.
const (
	flushPollEvery = 500 * time.Millisecond
	flushRecordTTL = 2 * time.Minute
	// flushPollLimit bounds the records read per poll; reading that many
	// means some may be unread, and everything is flushed locally.
	flushPollLimit = 256
	// flushGap: an index that could not read the records for this long may
	// have missed some (they expire after flushRecordTTL), so its next
	// successful poll flushes everything locally.
	flushGap = flushRecordTTL / 2
)

// WatchFlushes makes the index call apply with each partition ("" for all)
// flushed through another replica's index, from now on, within about
// flushPollEvery of the flush. apply must not block for long; it is called
// from one goroutine. Calling WatchFlushes again replaces apply.
func (ix *Index) WatchFlushes(apply func(partition string)) {
	ix.mu.Lock()
	first := ix.applyFlush == nil
	ix.applyFlush = apply
	ix.mu.Unlock()
	if first {
		ix.wg.Add(1)
		go ix.pollFlushes()
	}
}

// recordFlush writes the flush record of partition after its points are
// deleted.
func (ix *Index) recordFlush(ctx context.Context, partition string) error {
	err := ix.putMarker(ctx, PointID("flush\x00"+rand.Text()), map[string]*qdrant.Value{
		"kind":    qdrant.NewValueString("flush"),
		"flushed": qdrant.NewValueString(partition),
		"by":      qdrant.NewValueString(ix.id),
		"expires": qdrant.NewValueInt(time.Now().Add(flushRecordTTL).UnixMilli()),
	})
	if err != nil {
		return fmt.Errorf("record the flush for the other replicas: %w", err)
	}
	return nil
}

// putMarker upserts one point that is not a cache entry (a flush record, a
// Responses owner): its payload has no partition, so no search or Get by
// key returns it, and its vector is a fixed unit vector the collection's
// dimension requires.
func (ix *Index) putMarker(ctx context.Context, id string, payload map[string]*qdrant.Value) error {
	v := make([]float32, ix.opts.Dimension)
	v[0] = 1
	cctx, cancel := ix.call(ctx)
	defer cancel()
	_, err := ix.points.Upsert(cctx, &qdrant.UpsertPoints{
		CollectionName: ix.opts.Collection,
		Wait:           qdrant.PtrOf(true),
		Points:         []*qdrant.PointStruct{{Id: qdrant.NewIDUUID(id), Vectors: qdrant.NewVectorsDense(v), Payload: payload}},
	})
	ix.observe(err)
	return err
}

// pollFlushes reads the flush records every flushPollEvery until Close.
func (ix *Index) pollFlushes() {
	defer ix.wg.Done()
	t := time.NewTicker(flushPollEvery)
	defer t.Stop()
	seen := map[string]bool{}
	lastOK := time.Now()
	for {
		select {
		case <-ix.done:
			return
		case <-t.C:
		}
		recs, err := ix.readFlushes()
		if err != nil {
			continue
		}
		ix.mu.Lock()
		apply := ix.applyFlush
		ix.mu.Unlock()
		if time.Since(lastOK) > flushGap || len(recs) >= flushPollLimit {
			ix.log.Warn("flush records may have been missed; flushing this replica's exact tier", "unread_for", time.Since(lastOK).Round(time.Second).String())
			apply("")
		}
		lastOK = time.Now()
		next := make(map[string]bool, len(recs))
		for _, r := range recs {
			next[r.id] = true
			if !seen[r.id] && r.by != ix.id {
				apply(r.partition)
			}
		}
		seen = next // records gone from Qdrant are not returned again
	}
}

type flushRecord struct{ id, by, partition string }

func (ix *Index) readFlushes() ([]flushRecord, error) {
	if err := ix.usable(); err != nil {
		return nil, err
	}
	v := make([]float32, ix.opts.Dimension)
	v[0] = 1
	ctx, cancel := ix.call(context.Background())
	defer cancel()
	res, err := ix.points.Query(ctx, &qdrant.QueryPoints{
		CollectionName: ix.opts.Collection,
		Query:          qdrant.NewQueryDense(v),
		Filter: &qdrant.Filter{Must: []*qdrant.Condition{
			qdrant.NewMatchKeyword("kind", "flush"),
			qdrant.NewRange("expires", &qdrant.Range{Gt: qdrant.PtrOf(float64(time.Now().UnixMilli()))}),
		}},
		Limit:       qdrant.PtrOf(uint64(flushPollLimit)),
		WithPayload: qdrant.NewWithPayload(true),
	})
	if err != nil {
		ix.observe(err)
		return nil, err
	}
	out := make([]flushRecord, 0, len(res.GetResult()))
	for _, p := range res.GetResult() {
		pl := p.GetPayload()
		if pl["kind"].GetStringValue() != "flush" {
			continue
		}
		out = append(out, flushRecord{id: p.GetId().GetUuid(), by: pl["by"].GetStringValue(), partition: pl["flushed"].GetStringValue()})
	}
	return out, nil
}
