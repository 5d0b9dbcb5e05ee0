package stored

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// sseRendersBytes bounds the memory of rendered replays. A replay is much
// larger than its answer (each word piece carries a ~180-byte event
// envelope), so renders are kept apart from the entries, by recency of use.
const sseRendersBytes = 32 << 20

// Placeholders rendered in place of the per-answer id suffix and created:
// the same lengths as the real values, so a render is patched, not rebuilt.
// A placeholder can only be found where replay wrote it: inside a JSON
// string every quote is escaped, so `"id":"…"` with bare quotes cannot come
// from the cached content.
const (
	sseIDHex      = "zzzzzzzzzzzzzzzzzzzzzzzz" // 24 characters, as a random 12 bytes in hex
	sseCreated    = 9999999999                 // 10 digits, as every unix time until 2286
	sseCreatedLen = 10
)

// sseRender is one cached answer replayed once as SSE, with the offsets of
// the placeholders.
type sseRender struct {
	body    []byte // the entry body it was rendered from
	out     []byte
	ids     []int // offsets of the 24 id characters
	times   []int // offsets of the 10 created digits
	patches []int // ids and times merged in order; an id offset is negated-1
}

// Renders keeps SSE replays of stored answers of APIs with FreshIDs,
// rendered once with placeholders and patched per hit (bounded by
// sseRendersBytes).
type Renders struct {
	c *ristretto.Cache[string, *sseRender]
}

// NewRenders builds an empty Renders.
func NewRenders() (*Renders, error) {
	c, err := ristretto.NewCache(&ristretto.Config[string, *sseRender]{
		NumCounters: 10 * 1024, MaxCost: sseRendersBytes, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("sse renders: %w", err)
	}
	return &Renders{c: c}, nil
}

// Close releases the renders.
func (rs *Renders) Close() { rs.c.Close() }

// replayFunc is wire.FreshIDs.ReplayWith.
type replayFunc func(w io.Writer, flush func(), stored []byte, id string, created int64, includeUsage bool) error

// renderReplay replays body once with the placeholders and finds them.
func renderReplay(body []byte, prefix string, includeUsage bool, replay replayFunc) (*sseRender, error) {
	var buf bytes.Buffer
	if err := replay(&buf, nil, body, prefix+sseIDHex, sseCreated, includeUsage); err != nil {
		return nil, err
	}
	r := &sseRender{body: body, out: buf.Bytes()}
	idPat := []byte(`"id":"` + prefix + sseIDHex + `"`)
	crPat := []byte(`"created":` + strconv.Itoa(sseCreated))
	for i := 0; ; {
		j := bytes.Index(r.out[i:], idPat)
		if j < 0 {
			break
		}
		r.ids = append(r.ids, i+j+len(`"id":"`)+len(prefix))
		i += j + len(idPat)
	}
	for i := 0; ; {
		j := bytes.Index(r.out[i:], crPat)
		if j < 0 {
			break
		}
		r.times = append(r.times, i+j+len(`"created":`))
		i += j + len(crPat)
	}
	for _, at := range r.ids {
		r.patches = append(r.patches, -at-1)
	}
	r.patches = append(r.patches, r.times...)
	slices.SortFunc(r.patches, func(a, b int) int { return offset(a) - offset(b) })
	return r, nil
}

// write sends the render with a fresh id and created, in as few writes as
// the patches allow, and flushes once at the end: the answer is complete,
// so there is nothing to gain from an event per packet.
func (r *sseRender) write(w io.Writer, flush func(), now time.Time) error {
	var idb [24]byte
	id := wire.AppendRandomHex(idb[:0], 12)
	created := strconv.AppendInt(nil, now.Unix(), 10)
	last := 0
	for _, p := range r.patches {
		val := created
		if p < 0 {
			val = id
		}
		at := offset(p)
		if _, err := w.Write(r.out[last:at]); err != nil {
			return err
		}
		if _, err := w.Write(val); err != nil {
			return err
		}
		last = at + len(val)
	}
	if _, err := w.Write(r.out[last:]); err != nil {
		return err
	}
	if flush != nil {
		flush()
	}
	return nil
}

// offset decodes an entry of sseRender.patches.
func offset(p int) int {
	if p < 0 {
		return -p - 1
	}
	return p
}

// Replay writes e, an answer of a Format with FreshIDs, as an SSE stream at
// now, from a render kept in rs when there is one for these bytes, and
// keeps the render for next time. A nil rs, or a time whose unix seconds
// are not 10 digits, falls back to a plain replay.
func (rs *Renders) Replay(w io.Writer, flush func(), e *cache.Entry, r *wire.FreshIDs, includeUsage bool, now time.Time) error {
	prefix := r.StreamPrefix
	if rs == nil || now.Unix() < 1e9 || now.Unix() > sseCreated {
		var idb [24]byte
		return r.ReplayWith(w, flush, e.Body, prefix+string(wire.AppendRandomHex(idb[:0], 12)), now.Unix(), includeUsage)
	}
	key := e.Key + "\x00" + prefix
	if includeUsage {
		key += "\x00usage"
	}
	rd, ok := rs.c.Get(key)
	if !ok || len(rd.body) != len(e.Body) || (len(e.Body) > 0 && &rd.body[0] != &e.Body[0]) {
		var err error
		if rd, err = renderReplay(e.Body, prefix, includeUsage, r.ReplayWith); err != nil {
			return err
		}
		rs.c.Set(key, rd, int64(len(rd.out)+16*len(rd.patches)+len(key)+64))
	}
	return rd.write(w, flush, now)
}
