package proxy

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/breakwater-dev/breakwater/proxy/flow"
)

// writeError sends an error in the shape of the API the client speaks (the
// route's Format; outside the cached routes, that of the API claiming the
// request, else the default API's), as flow.WriteError.
func writeError(c echo.Context, status int, code, message string, retryAfter time.Duration) error {
	return flow.WriteError(c.Response(), formatOf(c), status, code, message, retryAfter)
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
