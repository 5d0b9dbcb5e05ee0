package qdrant

import (
	"context"
	"fmt"
	"time"

	"github.com/qdrant/go-client/qdrant"
)

// OwnerTTL is how long a Responses id's owner is kept: OpenAI keeps a
// stored response for 30 days
// (https://platform.openai.com/docs/guides/your-data#v1responses), after
// which its id is no use to anyone.
const OwnerTTL = 30 * 24 * time.Hour

// maxOwnerIDBytes bounds the ids (and upstream names) stored: OpenAI's ids
// are about 55 bytes.
const maxOwnerIDBytes = 256

// ownerPointID is the point of a Responses id's owner record for one
// tenant scope; the prefix keeps it apart from every entry's PointID(exact
// key).
func ownerPointID(scope, id string) string { return PointID("owner\x00" + scope + "\x00" + id) }

// PutOwner records that upstream created the Responses id in answer to
// the tenant scope (its cache partition), for every replica: a follow-up naming the id (previous_response_id) may reach any
// of them, and only the creating upstream's account knows it. The record is
// a point with payload kind = "owner", "scope", "owner_id", "upstream" and
// "expires" (now + OwnerTTL, removed by the expiry sweep); like the flush
// records it has no partition, so no search or Get by key returns it, and
// a flush of all partitions deletes it (follow-ups then take the route's
// first upstream, as for an unknown id).
func (ix *Index) PutOwner(ctx context.Context, scope, id, upstream string) error {
	if err := ix.usable(); err != nil {
		return err
	}
	if id == "" || upstream == "" || len(id) > maxOwnerIDBytes || len(upstream) > maxOwnerIDBytes {
		return fmt.Errorf("put response owner: id and upstream must be 1 to %d bytes", maxOwnerIDBytes)
	}
	err := ix.putMarker(ctx, ownerPointID(scope, id), map[string]*qdrant.Value{
		"kind":     qdrant.NewValueString("owner"),
		"scope":    qdrant.NewValueString(scope),
		"owner_id": qdrant.NewValueString(id),
		"upstream": qdrant.NewValueString(upstream),
		"expires":  qdrant.NewValueInt(time.Now().Add(OwnerTTL).UnixMilli()),
	})
	if err != nil {
		return fmt.Errorf("put response owner: %w", err)
	}
	return nil
}

// Owner returns the upstream recorded by PutOwner for id in scope, if any:
// an id recorded for another scope (tenant) is unknown.
func (ix *Index) Owner(ctx context.Context, scope, id string) (string, bool, error) {
	if err := ix.usable(); err != nil {
		return "", false, err
	}
	if id == "" || len(id) > maxOwnerIDBytes {
		return "", false, nil
	}
	cctx, cancel := ix.call(ctx)
	defer cancel()
	res, err := ix.points.Get(cctx, &qdrant.GetPoints{
		CollectionName: ix.opts.Collection,
		Ids:            []*qdrant.PointId{qdrant.NewIDUUID(ownerPointID(scope, id))},
		WithPayload:    qdrant.NewWithPayload(true),
		WithVectors:    qdrant.NewWithVectors(false),
	})
	if err != nil {
		ix.observe(err)
		return "", false, fmt.Errorf("get response owner: %w", err)
	}
	now := time.Now().UnixMilli()
	for _, p := range res.GetResult() {
		pl := p.GetPayload()
		if pl["kind"].GetStringValue() == "owner" && pl["scope"].GetStringValue() == scope &&
			pl["owner_id"].GetStringValue() == id && pl["expires"].GetIntegerValue() > now {
			return pl["upstream"].GetStringValue(), true, nil
		}
	}
	return "", false, nil
}
