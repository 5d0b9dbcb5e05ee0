package flow

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// controls are the per-request cache controls a client may send.
type controls struct {
	noCache   bool          // skip lookup, store the fresh answer
	noStore   bool          // do not write
	maxAge    time.Duration // accept only entries younger than this; 0 = any
	threshold float32       // X-Breakwater-Threshold; 0 = config's
	class     string        // X-Breakwater-Class
}

func parseControls(h http.Header) (controls, error) {
	var c controls
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			switch {
			case d == "no-cache":
				c.noCache = true
			case d == "no-store":
				c.noStore = true
			case strings.HasPrefix(d, "max-age="):
				n, err := strconv.Atoi(strings.TrimPrefix(d, "max-age="))
				if err != nil || n < 0 {
					return c, fmt.Errorf("Cache-Control %q: max-age must be a whole number of seconds >= 0", d)
				}
				c.maxAge = time.Duration(n) * time.Second
				if n == 0 {
					// max-age=0 accepts nothing cached: the same as no-cache.
					c.noCache = true
				}
			}
		}
	}
	if v := h.Get(HeaderThreshold); v != "" {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || f <= 0 || f > 1 {
			return c, fmt.Errorf("%s = %q: must be a number in (0, 1]; it can only raise the configured threshold", HeaderThreshold, v)
		}
		c.threshold = float32(f)
	}
	c.class = h.Get(HeaderClass)
	if len(c.class) > 32 || strings.ContainsAny(c.class, " \t\r\n") {
		return c, fmt.Errorf("%s = %q: must be a short pool name such as realtime or batch", HeaderClass, c.class)
	}
	return c, nil
}

// requestShape is the part of a request body the proxy itself needs. It is
// filled from the cache key, never by decoding the body into a struct again:
// encoding/json matches struct fields case-insensitively, so a second decode
// would read "MODEL" where the key read "model" (cache.DecodeObject).
type requestShape struct {
	Model        string
	Stream       bool
	Temperature  *float64
	IncludeUsage bool
}

// shapeOf is the shape the key k read.
func shapeOf(k wire.Key) requestShape {
	return requestShape{Model: k.Model, Stream: k.Stream, Temperature: k.Temperature, IncludeUsage: k.IncludeUsage}
}
