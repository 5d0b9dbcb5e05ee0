package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

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
