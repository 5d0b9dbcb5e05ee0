package proxy

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// dashboardHTML is one self-contained page (no CDN, no build step) that
// refreshes from /stats.
//
//go:embed dashboard.html
var dashboardHTML []byte

func (s *Server) handleDashboard(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, echo.MIMETextHTMLCharsetUTF8, dashboardHTML)
}
