package proxy

import (
	"errors"
	"maps"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

// writeError sends an error in the shape of the API the client speaks (the
// route's Format; outside the cached routes, that of the API claiming the
// request, else the default API's). retryAfter > 0 adds Retry-After in
// whole seconds (rounded up, at least 1) because clients and SDKs only parse
// integers there.
func writeError(c echo.Context, status int, code, message string, retryAfter time.Duration) error {
	if retryAfter > 0 {
		secs := int(math.Ceil(retryAfter.Seconds()))
		if secs < 1 {
			secs = 1
		}
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	}
	f := formatOf(c)
	if f == nil {
		// Before the request met this server's middleware: the error
		// object most clients parse.
		return c.Blob(status, echo.MIMEApplicationJSON, wire.ErrorObjectJSON(status, code, message))
	}
	status, body := f.Error(status, code, message)
	return c.Blob(status, echo.MIMEApplicationJSON, body)
}

// writeUpstreamError turns an error of the caller into the response the
// client gets. Errors that are not the caller's typed error are 502.
func writeUpstreamError(c echo.Context, err error) error {
	var ue *upstream.Error
	if errors.As(err, &ue) {
		c.Response().Header().Set(HeaderAttempts, strconv.Itoa(ue.Attempts))
		// A budget's refusal (fleet.Exceeded) says its limit and what remains.
		var hs interface{ Headers() http.Header }
		if errors.As(err, &hs) {
			maps.Copy(c.Response().Header(), hs.Headers())
		}
		return writeError(c, ue.Status, ue.Code, ue.Message, ue.RetryAfter)
	}
	return writeError(c, http.StatusBadGateway, "upstream_error", "breakwater: upstream call failed: "+err.Error(), 0)
}

// httpErrorHandler renders echo's own errors (unknown route, wrong method,
// panics recovered) in the client's API shape too.
func httpErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	msg := "breakwater: internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(status)
		}
	}
	_ = writeError(c, status, codeForStatus(status), msg, 0)
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	default:
		return "internal_error"
	}
}
