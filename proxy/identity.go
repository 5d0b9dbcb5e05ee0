package proxy

import (
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// appendRandomHex appends n random bytes as 2n hex digits.
func appendRandomHex(dst []byte, n int) []byte {
	var b [16]byte
	for i := 0; i < n; i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.AppendEncode(dst, b[:n])
}

// rewriteIdentity gives a cached body a fresh "id" and "created", so every
// answer looks like a new completion to the client. It rewrites the two
// top-level values in place with a small scanner instead of decoding and
// re-encoding the body: on the exact-hit path that was most of the time
// (BenchmarkExactHitHandler). Bodies it cannot scan are returned unchanged.
func rewriteIdentity(body []byte, now time.Time) []byte {
	return prepareWire(body).appendTo(make([]byte, 0, len(body)+32), now)
}

// wireBody is a stored completion ready to write: where its top-level "id"
// and "created" values are is found once, when it is stored, so a hit writes
// the stored bytes around two fresh values without scanning or copying them.
type wireBody struct {
	body               []byte
	idStart, idEnd     int // -1 when absent (or the body cannot be scanned)
	crStart, crEnd     int
	prefix             string // of the fresh id: chatcmpl-bw or cmpl-bw
	idFirst, scannable bool
	// usage is the body's token usage, read when it was stored (usageSet);
	// savedHeader its X-Breakwater-Tokens-Saved value, built once.
	usage       Usage
	usageSet    bool
	savedHeader []string
}

// prepareWire scans body once for its identity fields.
func prepareWire(body []byte) *wireBody {
	w := &wireBody{body: body, idStart: -1, idEnd: -1, crStart: -1, crEnd: -1, prefix: "chatcmpl-bw"}
	idStart, idEnd, crStart, crEnd := -1, -1, -1, -1
	ok := wire.TopFields(body, func(key []byte, vStart, vEnd int) bool {
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
	if idStart >= 0 && idEnd-idStart > 6 && string(body[idStart:idStart+6]) == `"cmpl-` {
		w.prefix = "cmpl-bw"
	}
	w.idStart, w.idEnd, w.crStart, w.crEnd = idStart, idEnd, crStart, crEnd
	w.idFirst = crStart < 0 || idStart < crStart
	w.scannable = true
	return w
}

// pieces calls emit with the body's bytes and the fresh values in order.
func (w *wireBody) pieces(now time.Time, emit func([]byte)) {
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
		id = appendRandomHex(id, 12)
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

// appendTo appends the body with fresh values to dst.
func (w *wireBody) appendTo(dst []byte, now time.Time) []byte {
	w.pieces(now, func(b []byte) { dst = append(dst, b...) })
	return dst
}

// size is the length of what pieces emits for now.
func (w *wireBody) size(now time.Time) int {
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

// write sends the body with fresh values as a 200 JSON answer, straight
// from the stored bytes.
func (w *wireBody) write(c echo.Context, now time.Time) error {
	resp := c.Response()
	resp.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	resp.Header().Set(echo.HeaderContentLength, strconv.Itoa(w.size(now)))
	resp.WriteHeader(http.StatusOK)
	var err error
	w.pieces(now, func(b []byte) {
		if err == nil {
			_, err = resp.Write(b)
		}
	})
	return err
}

// wireOf returns e's prepared body, preparing it when e has none (an
// entry read back from an index) or one for other bytes.
func wireOf(e *cache.Entry) *wireBody {
	if w, ok := e.Wire.(*wireBody); ok && len(w.body) == len(e.Body) && (len(e.Body) == 0 || &w.body[0] == &e.Body[0]) {
		return w
	}
	return prepareWire(e.Body)
}
