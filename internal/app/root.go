package app

import (
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// startLine is the one start-up log line a newcomer needs: where to send
// requests, where to look, where they go, where the cache lives.
func (a *App) startLine(listen string) []any {
	pages := a.AdminAddr()
	if pages == "" {
		pages = listen
	}
	ups := make([]string, 0, len(a.cfg.Upstreams))
	for _, u := range a.cfg.Upstreams {
		ups = append(ups, u.Name+"="+u.BaseURL)
	}
	index := a.cfg.Vector.Backend
	switch {
	case !a.cfg.Cache.Enabled:
		index = "off (cache disabled)"
	case index == "qdrant":
		index = "qdrant " + a.cfg.Vector.Qdrant.Addr + " collection " + a.cfg.Vector.Qdrant.Collection
	default:
		index = "embedded " + a.cfg.Vector.Path
	}
	return []any{
		"listen", listen,
		"api", "http://" + hostForURL(listen) + "/v1",
		"dashboard", "http://" + hostForURL(pages) + "/dashboard",
		"admin_listen", a.AdminAddr(),
		"upstreams", strings.Join(ups, " "),
		"index", index,
		"data_dir", a.cfg.Cache.DataDir,
		"embedder", a.cfg.Embed.Provider,
		"budgets", a.cfg.BudgetScope(),
	}
}

// hostForURL turns a listen address into one a browser on the same host
// can open: an unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") is
// shown as 127.0.0.1.
func hostForURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// rootLinks is the body of GET /: Breakwater has no page of its own at /,
// so it says where the pages are.
type rootLinks struct {
	Service   string `json:"service"`
	API       string `json:"api"`
	Dashboard string `json:"dashboard"`
	Stats     string `json:"stats"`
	Metrics   string `json:"metrics"`
	Health    string `json:"health"`
	Ready     string `json:"ready"`
	Docs      string `json:"docs"`
}

func (a *App) handleRoot(c echo.Context) error {
	pages := ""
	if addr := a.AdminAddr(); addr != "" {
		pages = "http://" + hostForURL(addr) // on the admin listener only
	}
	return c.JSON(http.StatusOK, rootLinks{
		Service:   "breakwater: a semantic cache in front of LLM APIs; point an SDK's base URL at /v1 here",
		API:       "/v1",
		Dashboard: pages + "/dashboard",
		Stats:     pages + "/stats",
		Metrics:   pages + "/metrics",
		Health:    "/healthz",
		Ready:     "/readyz",
		Docs:      "breakwater help; README.md",
	})
}
