package flow

import (
	"net/http"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/cache"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// wireBody is a stored answer ready to write (cache.Entry.Wire), prepared
// once when it is stored: its token usage, and for an API whose answers
// get a fresh id and created per hit (wire.FreshIDs), where those are.
type wireBody struct {
	body []byte
	// id is the prepared identity; nil when the Format's answers have none.
	id *wire.Identity
	// usage is the body's token usage, read when it was stored (usageSet);
	// savedHeader its X-Breakwater-Tokens-Saved value, built once.
	usage       Usage
	usageSet    bool
	savedHeader []string
}

// prepareStored prepares body, an answer of f, for the hits to come.
func prepareStored(body []byte, f Format) *wireBody {
	w := &wireBody{body: body}
	if f.FreshIDs != nil {
		w.id = wire.PrepareIdentity(body, f.FreshIDs.JSONPrefix)
	}
	return w
}

// write sends the body with fresh values as a 200 JSON answer, straight
// from the stored bytes.
func (w *wireBody) write(resp http.ResponseWriter, now time.Time) error {
	resp.Header().Set("Content-Type", jsonType)
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

// storedOf returns e's prepared body, an answer of f (which has FreshIDs),
// preparing it when e has none (an entry read back from an index) or one
// for other bytes.
func storedOf(e *cache.Entry, f Format) *wireBody {
	if w, ok := e.Wire.(*wireBody); ok && w.id != nil && len(w.body) == len(e.Body) && (len(e.Body) == 0 || &w.body[0] == &e.Body[0]) {
		return w
	}
	return prepareStored(e.Body, f)
}
