// Package stored prepares the answers the cache stores for the hits to
// come (cache.Entry.Wire): their token usage read once, the offsets of the
// id and created an API with FreshIDs refreshes per hit, and SSE replays
// rendered once and patched per hit.
package stored

import (
	"net/http"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// Body is a stored answer ready to write (cache.Entry.Wire), prepared
// once when it is stored: its token usage, and for an API whose answers
// get a fresh id and created per hit (wire.FreshIDs), where those are.
type Body struct {
	body []byte
	// id is the prepared identity; nil when the Format's answers have none.
	id *wire.Identity
	// usage is the body's token usage, read when it was stored (usageSet);
	// savedHeader its X-Breakwater-Tokens-Saved value, built once.
	usage       wire.Usage
	usageSet    bool
	savedHeader []string
}

// Prepare prepares body, an answer of f whose usage is u, for the hits to
// come.
func Prepare(body []byte, f *wire.Format, u wire.Usage) *Body {
	w := prepare(body, f)
	w.usage, w.usageSet = u, true
	if u.Known {
		w.savedHeader = []string{SavedValue(u)}
	}
	return w
}

func prepare(body []byte, f *wire.Format) *Body {
	w := &Body{body: body}
	if f.FreshIDs != nil {
		w.id = wire.PrepareIdentity(body, f.FreshIDs.JSONPrefix)
	}
	return w
}

// Write sends the body with fresh values as a 200 JSON answer, straight
// from the stored bytes.
func (w *Body) Write(resp http.ResponseWriter, now time.Time) error {
	resp.Header().Set("Content-Type", "application/json")
	resp.Header().Set("Content-Length", strconv.Itoa(w.id.Size(now)))
	resp.WriteHeader(http.StatusOK)
	var err error
	w.id.Pieces(now, func(b []byte) {
		if err == nil {
			_, err = resp.Write(b)
		}
	})
	return err
}

// Of returns e's prepared body, an answer of f (which has FreshIDs), preparing
// it when e has none (an entry read back from an index) or one for other
// bytes.
func Of(e *cache.Entry, f *wire.Format) *Body {
	if w, ok := e.Wire.(*Body); ok && w.id != nil && len(w.body) == len(e.Body) && (len(e.Body) == 0 || &w.body[0] == &e.Body[0]) {
		return w
	}
	return prepare(e.Body, f)
}

// UsageOf is the usage read when e was stored, and its
// X-Breakwater-Tokens-Saved value; ok is false when e holds none (an entry
// read back from an index): the caller reads the body.
func UsageOf(e *cache.Entry) (u wire.Usage, header []string, ok bool) {
	w, ok := e.Wire.(*Body)
	if !ok || !w.usageSet || len(w.body) != len(e.Body) {
		return wire.Usage{}, nil, false
	}
	return w.usage, w.savedHeader, true
}

// SavedValue is u as X-Breakwater-Tokens-Saved says it: "<input>,<output>".
func SavedValue(u wire.Usage) string {
	var buf [48]byte
	b := strconv.AppendUint(buf[:0], u.Input, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, u.Output, 10)
	return string(b)
}
