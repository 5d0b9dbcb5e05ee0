package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// adminPath reports whether path belongs on the admin listener: the
// operator's pages and the destructive endpoints, as Envoy keeps its
// /stats and /clusters on a separate admin port.
func adminPath(path string) bool {
	switch path {
	case "/stats", "/metrics", "/dashboard", "/admin":
		return true
	}
	return strings.HasPrefix(path, "/admin/")
}

// healthPath is answered on both listeners (probes may use either).
func healthPath(path string) bool { return path == "/healthz" || path == "/readyz" }

// split serves only the admin paths (admin true) or only the others, and
// health on both; the rest is 404 in the API's error shape.
func split(h http.Handler, admin bool) http.Handler {
	where := "server.admin_listen"
	if admin {
		where = "server.listen"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if healthPath(r.URL.Path) || adminPath(r.URL.Path) == admin {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"message":"breakwater: %s is served on %s","type":"invalid_request_error","param":null,"code":"not_found"}}`, r.URL.Path, where)
	})
}

// listenAdmin opens the admin listener when server.admin_listen is set and
// splits the routes between it and the main listener.
func (a *App) listenAdmin() error {
	addr := a.cfg.Server.AdminListen
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("config: server.admin_listen = %q: %w", addr, err)
	}
	a.adminLn = ln
	a.adminHTTP = a.server.HTTPServer(addr)
	a.adminHTTP.Handler = split(a.server.Handler(), true)
	a.adminHTTP.ErrorLog = slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)
	a.http.Handler = split(a.server.Handler(), false)
	return nil
}

// AdminAddr is the admin listener's address; "" when server.admin_listen
// is not set.
func (a *App) AdminAddr() string {
	if a.adminLn == nil {
		return ""
	}
	return a.adminLn.Addr().String()
}

func (a *App) serveAdmin() {
	if a.adminHTTP == nil {
		return
	}
	go func() {
		if err := a.adminHTTP.Serve(a.server.Listener(a.adminLn)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("admin listener stopped", "err", err)
		}
	}()
}

func (a *App) shutdownAdmin(ctx context.Context) error {
	if a.adminHTTP == nil {
		return nil
	}
	if err := a.adminHTTP.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown admin listener: %w", err)
	}
	return nil
}
