package flow

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
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

// readBody reads at most limit bytes; errTooLarge when the body is longer.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	b, err := upstream.ReadSized(io.LimitReader(r.Body, limit+1), r.ContentLength)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

var errTooLarge = errors.New("request body too large")

// requestBody reads the request's body within server.max_body_bytes. When it
// cannot, it answers in the route's error shape (413 request_too_large
// beyond the limit, 400 invalid_request when the read fails) and reports
// answered: the handler then returns err.
func (s *Server) requestBody(c echo.Context) (body []byte, answered bool, err error) {
	body, err = readBody(c.Request(), s.opts.MaxBodyBytes)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, true, writeError(c, http.StatusRequestEntityTooLarge, "request_too_large",
			"breakwater: request body is larger than server.max_body_bytes ("+strconv.FormatInt(s.opts.MaxBodyBytes, 10)+" bytes)", 0)
	case err != nil:
		return nil, true, writeError(c, http.StatusBadRequest, "invalid_request", "breakwater: "+err.Error(), 0)
	}
	return body, false, nil
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
