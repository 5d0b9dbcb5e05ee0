package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
)

// Log record payloads (see wal.go for the framing around them):
//
//	upsert:           opUpsert uvarint(n) n×(entry vector)
//	upsert with users: opUpsertUsers uvarint(n) n×(entry user vector)
//	delete keys:      opDeleteKeys uvarint(n) n×string
//	delete partition: opDeletePartition string   ("" deletes all)
//
// entry is key, partition, fingerprint, query, model (strings), body (bytes),
// created, expires (times); user is the entry's end user (string, a keyed
// hash) and a byte (1 agreed, else 0). A batch whose entries all have no
// user and are not agreed is written as opUpsert, so a store of a
// deployment without end-user identities stays readable by earlier builds;
// an opUpsert entry reads back as the anonymous user's, unagreed. A string or bytes is uvarint(len) then the bytes;
// a time is one byte 0 for the zero time, else 1, varint(unix seconds),
// uvarint(nanoseconds); vector is uvarint(dim) then dim little-endian
// float32 bits. The snapshot (snapshot.go) reuses entry and vector.
const (
	opUpsert          = 1
	opDeleteKeys      = 2
	opDeletePartition = 3
	opUpsertUsers     = 4
)

var errShort = errors.New("record too short")

type encoder struct{ b []byte }

func (e *encoder) byte(c byte)      { e.b = append(e.b, c) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }

func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.byte(0)
		return
	}
	e.byte(1)
	e.b = binary.AppendVarint(e.b, t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
}

func (e *encoder) vector(v []float32) {
	e.uvarint(uint64(len(v)))
	n := len(e.b)
	e.b = slices.Grow(e.b, 4*len(v))[:n+4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(e.b[n+4*i:], math.Float32bits(x))
	}
}

func (e *encoder) entry(en *cache.Entry) {
	e.str(en.Key)
	e.str(en.Partition)
	e.str(en.Fingerprint)
	e.str(en.Query)
	e.str(en.Model)
	e.bytes(en.Body)
	e.time(en.Created)
	e.time(en.Expires)
}

// decoder reads what encoder wrote; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 { return decodeVarint(d, binary.Uvarint) }
func (d *decoder) varint() int64   { return decodeVarint(d, binary.Varint) }

// decodeVarint reads one varint of d with read (binary.Uvarint or
// binary.Varint).
func decodeVarint[T int64 | uint64](d *decoder, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) raw() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string   { return string(d.raw()) }
func (d *decoder) bytes() []byte { return append([]byte{}, d.raw()...) }

func (d *decoder) time() time.Time { return readTime(d) }

// timeReader is what readTime reads with: the decoder of one entry, and
// the snapshot's reader (snapload.go).
type timeReader interface {
	byte() byte
	varint() int64
	uvarint() uint64
	fail(error)
}

// readTime reads a time as encoder.time wrote it: a tag byte, 0 for the
// zero time, 1 followed by its Unix seconds and nanoseconds.
func readTime(r timeReader) time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := r.varint()
		return time.Unix(sec, int64(r.uvarint()))
	default:
		r.fail(errors.New("bad time tag"))
		return time.Time{}
	}
}

func (d *decoder) vector(dim int) []float32 {
	if n := d.uvarint(); n != uint64(dim) {
		d.fail(fmt.Errorf("vector of %d dims in a store of %d: %w", n, dim, cache.ErrDimension))
		return nil
	}
	if len(d.b) < 4*dim {
		d.fail(errShort)
		return nil
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(d.b[4*i:]))
	}
	d.b = d.b[4*dim:]
	return v
}

// user writes an entry's end user and agreement (opUpsertUsers, snapshot
// slot tag 2).
func (e *encoder) user(en *cache.Entry) {
	e.str(en.User)
	if en.Agreed {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

// hasUser reports whether en needs the user fields to be written.
func hasUser(en *cache.Entry) bool { return en.User != "" || en.Agreed }

func (d *decoder) user(en *cache.Entry) {
	en.User = d.str()
	en.Agreed = d.byte() == 1
}

func (d *decoder) entry() cache.Entry {
	return cache.Entry{
		Key: d.str(), Partition: d.str(), Fingerprint: d.str(), Query: d.str(), Model: d.str(),
		Body: d.bytes(), Created: d.time(), Expires: d.time(),
	}
}

func encodeUpsert(items []cache.IndexItem) []byte {
	// One allocation for the record: its size is known but for the varints
	// (each at most binary.MaxVarintLen64).
	size := 1 + binary.MaxVarintLen64
	for i := range items {
		en := &items[i].Entry
		size += 7*binary.MaxVarintLen64 + len(en.Key) + len(en.Partition) + len(en.Fingerprint) +
			len(en.Query) + len(en.Model) + len(en.User) + 1 + len(en.Body) + 2*(1+2*binary.MaxVarintLen64) +
			binary.MaxVarintLen64 + 4*len(items[i].Vector)
	}
	users := slices.ContainsFunc(items, func(it cache.IndexItem) bool { return hasUser(&it.Entry) })
	e := encoder{b: make([]byte, 0, size)}
	if users {
		e.byte(opUpsertUsers)
	} else {
		e.byte(opUpsert)
	}
	e.uvarint(uint64(len(items)))
	for i := range items {
		e.entry(&items[i].Entry)
		if users {
			e.user(&items[i].Entry)
		}
		e.vector(items[i].Vector)
	}
	return e.b
}

func encodeDeleteKeys(keys []string) []byte {
	e := encoder{}
	e.byte(opDeleteKeys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
	}
	return e.b
}

func encodeDeletePartition(partition string) []byte {
	e := encoder{}
	e.byte(opDeletePartition)
	e.str(partition)
	return e.b
}

// apply replays one log record payload onto s. The caller flushes after
// the last record, so that replay links new graph nodes in one parallel batch.
func (s *state) apply(payload []byte, o Options) error {
	d := decoder{b: payload}
	switch op := d.byte(); op {
	case opUpsert, opUpsertUsers:
		n := d.uvarint()
		for i := uint64(0); i < n && d.err == nil; i++ {
			e := d.entry()
			if op == opUpsertUsers {
				d.user(&e)
			}
			v := d.vector(s.dim)
			if d.err == nil && itemBytes(e, s.dim) <= o.MaxEntryBytes {
				s.put(e, v)
			}
		}
		s.evict(o)
	case opDeleteKeys:
		n := d.uvarint()
		for i := uint64(0); i < n && d.err == nil; i++ {
			if k := d.str(); d.err == nil {
				s.deleteKey(k)
			}
		}
	case opDeletePartition:
		if p := d.str(); d.err == nil {
			s.deletePartition(p)
		}
	default:
		if d.err == nil {
			return fmt.Errorf("decode record: unknown op %d", op)
		}
	}
	if d.err != nil {
		return fmt.Errorf("decode record: %w", d.err)
	}
	return nil
}
