package wire

import (
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"time"
)

// AppendRandomHex appends n random bytes as 2n hex digits.
func AppendRandomHex(dst []byte, n int) []byte {
	var b [16]byte
	for i := 0; i < n; i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.AppendEncode(dst, b[:n])
}

// Identity is a stored answer ready to be served with a fresh top-level
// "id" and "created" (Format.FreshIDs): where the two values are is found once,
// when it is stored, so a hit writes the stored bytes around two fresh
// values without scanning or copying them.
type Identity struct {
	body               []byte
	idStart, idEnd     int // -1 when absent (or the body cannot be scanned)
	crStart, crEnd     int
	prefix             string // of the fresh id
	idFirst, scannable bool
}

// PrepareIdentity scans body once for its identity fields; prefix gives
// the fresh id's prefix from the stored "id" value (FreshIDs.JSONPrefix).
func PrepareIdentity(body []byte, prefix func(storedID []byte) string) *Identity {
	w := &Identity{body: body, idStart: -1, idEnd: -1, crStart: -1, crEnd: -1}
	idStart, idEnd, crStart, crEnd := -1, -1, -1, -1
	ok := TopFields(body, func(key []byte, vStart, vEnd int) bool {
		switch string(key) {
		case "id":
			idStart, idEnd = vStart, vEnd
		case "created":
			crStart, crEnd = vStart, vEnd
		}
		return true
	})
	if !ok {
		return w
	}
	if idStart >= 0 {
		w.prefix = prefix(body[idStart:idEnd])
	}
	w.idStart, w.idEnd, w.crStart, w.crEnd = idStart, idEnd, crStart, crEnd
	w.idFirst = crStart < 0 || idStart < crStart
	w.scannable = true
	return w
}

// Pieces calls emit with the body's bytes and the fresh values in order.
func (w *Identity) Pieces(now time.Time, emit func([]byte)) {
	if !w.scannable || (w.idStart < 0 && w.crStart < 0) {
		emit(w.body)
		return
	}
	var idBuf [48]byte
	var crBuf [24]byte
	type span struct {
		start, end int
		val        []byte
	}
	var spans [2]span
	n := 0
	if w.idStart >= 0 {
		id := append(idBuf[:0], '"')
		id = append(id, w.prefix...)
		id = AppendRandomHex(id, 12)
		spans[n] = span{w.idStart, w.idEnd, append(id, '"')}
		n++
	}
	if w.crStart >= 0 {
		spans[n] = span{w.crStart, w.crEnd, strconv.AppendInt(crBuf[:0], now.Unix(), 10)}
		n++
	}
	if n == 2 && !w.idFirst {
		spans[0], spans[1] = spans[1], spans[0]
	}
	last := 0
	for _, s := range spans[:n] {
		emit(w.body[last:s.start])
		emit(s.val)
		last = s.end
	}
	emit(w.body[last:])
}

// AppendTo appends the body with fresh values to dst.
func (w *Identity) AppendTo(dst []byte, now time.Time) []byte {
	w.Pieces(now, func(b []byte) { dst = append(dst, b...) })
	return dst
}

// Size is the length of what Pieces emits for now.
func (w *Identity) Size(now time.Time) int {
	n := len(w.body)
	if !w.scannable {
		return n
	}
	if w.idStart >= 0 {
		n += len(`""`) + len(w.prefix) + 2*12 - (w.idEnd - w.idStart)
	}
	if w.crStart >= 0 {
		var b [24]byte
		n += len(strconv.AppendInt(b[:0], now.Unix(), 10)) - (w.crEnd - w.crStart)
	}
	return n
}

// Body is the stored answer.
func (w *Identity) Body() []byte { return w.body }
