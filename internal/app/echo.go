package app

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

func echoHandler(h http.Handler) echo.HandlerFunc {
	return echo.WrapHandler(h)
}
