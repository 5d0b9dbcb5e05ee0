package flow

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"

	"github.com/dgraph-io/ristretto/v2"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// keyMemoBytes bounds the memory of the key memo: about 10k recent
// request bodies' keys.
const keyMemoBytes = 4 << 20

// keyMemo remembers the cache key each recent request body parsed to,
// under a SHA-256 of the partition, endpoint and raw body bytes. A client
// that repeats a request sends the same bytes (an SDK serialises the same
// call the same way), so an exact hit is keyed with one hash instead of a
// JSON parse, canonicalisation and two more hashes: in the exact-hit
// profile, building the key was 43 % of the handler. A body that differs by
// one byte is parsed as before and gets the same key if it means the same.
type keyMemo struct {
	c *ristretto.Cache[string, wire.Key]
}

func newKeyMemo() (*keyMemo, error) {
	c, err := ristretto.NewCache(&ristretto.Config[string, wire.Key]{
		NumCounters: 10 * keyMemoBytes / 256,
		MaxCost:     keyMemoBytes,
		BufferItems: 64,
		// The key is a SHA-256 digest already: its first 128 bits are the
		// hash and the conflict check.
		KeyToHash: func(d string) (uint64, uint64) {
			return binary.LittleEndian.Uint64([]byte(d[:8])), binary.LittleEndian.Uint64([]byte(d[8:16]))
		},
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("new key memo: %w", err)
	}
	return &keyMemo{c: c}, nil
}

// digest is the memo key of one request.
func (m *keyMemo) digest(partition, endpoint string, body []byte) string {
	// One Sum256 over the bytes laid out in a stack buffer when they fit
	// (a typical chat body does), instead of a hash.Hash on the heap.
	var stack [1024]byte
	in := stack[:0]
	in = binary.BigEndian.AppendUint64(in, uint64(len(partition)))
	in = append(in, partition...)
	in = binary.BigEndian.AppendUint64(in, uint64(len(endpoint)))
	in = append(in, endpoint...)
	if len(in)+len(body) > len(stack) {
		// A large body is hashed where it is, not copied first.
		h := sha256.New()
		h.Write(in)
		h.Write(body)
		return string(h.Sum(stack[:0]))
	}
	in = append(in, body...)
	sum := sha256.Sum256(in)
	return string(sum[:])
}

// get returns the remembered key of digest. The key's Temperature is a
// copy: callers may decode into it.
func (m *keyMemo) get(digest string) (wire.Key, bool) {
	k, ok := m.c.Get(digest)
	if ok && k.Temperature != nil {
		t := *k.Temperature
		k.Temperature = &t
	}
	return k, ok
}

// put remembers k under digest (admission is ristretto's to decide).
func (m *keyMemo) put(digest string, k wire.Key) {
	if k.Temperature != nil {
		t := *k.Temperature
		k.Temperature = &t
	}
	cost := int64(len(digest)+len(k.Partition)+len(k.Endpoint)+len(k.Exact)+len(k.Fingerprint)+len(k.Query)+len(k.Model)+len(k.EndUser)) + 160
	m.c.Set(digest, k, cost)
}

func (m *keyMemo) close() { m.c.Close() }

// requestKey builds the cache key of body, from the memo when these exact
// bytes were keyed before.
// A query too long for the semantic tier is dropped from the key
// (cache.MaxQueryBytes), so neither the memo nor the request holds a second
// copy of a large prompt.
func (s *Flow) requestKey(f Format, partition string, h http.Header, body []byte) (wire.Key, error) {
	if !f.BodyKeyed || s.keys == nil {
		k, err := f.Key(partition, h, body, s.opts.Group)
		k.DropLongQuery()
		return k, err
	}
	d := s.keys.digest(partition, f.Endpoint, body)
	if k, ok := s.keys.get(d); ok {
		return k, nil
	}
	k, err := f.Key(partition, h, body, s.opts.Group)
	if err == nil {
		k.DropLongQuery()
		s.keys.put(d, k)
	}
	return k, err
}
