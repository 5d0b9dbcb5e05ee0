package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func status(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With server.admin_listen, the operator's pages and /admin/* leave the API
// port (Envoy's admin port is the model); health answers on both.
func TestAdminListenerSplitsRoutes(t *testing.T) {
	r := startBounds(t, `admin_listen = "127.0.0.1:0"`)
	admin := "http://" + r.app.AdminAddr()
	if admin == "http://" {
		t.Fatal("no admin listener")
	}
	for _, p := range []string{"/stats", "/metrics", "/dashboard"} {
		if got, body := status(t, http.MethodGet, r.url+p); got != 404 || !strings.Contains(body, "server.admin_listen") {
			t.Errorf("GET %s on the API listener = %d %s, want 404 naming server.admin_listen", p, got, body)
		}
		if got, _ := status(t, http.MethodGet, admin+p); got != 200 {
			t.Errorf("GET %s on the admin listener = %d, want 200", p, got)
		}
	}
	if got, _ := status(t, http.MethodDelete, r.url+"/admin/cache"); got != 404 {
		t.Errorf("DELETE /admin/cache on the API listener = %d, want 404", got)
	}
	if got, _ := status(t, http.MethodDelete, admin+"/admin/cache"); got != 403 {
		t.Errorf("DELETE /admin/cache on the admin listener without a token = %d, want 403", got)
	}
	for _, base := range []string{r.url, admin} {
		if got, _ := status(t, http.MethodGet, base+"/healthz"); got != 200 {
			t.Errorf("GET %s/healthz = %d, want 200", base, got)
		}
	}
	if got, _ := status(t, http.MethodGet, admin+"/v1/models"); got != 404 {
		t.Errorf("GET /v1/models on the admin listener = %d, want 404", got)
	}
	answersMeanwhile(t, r)
}

// TestOnlyModelRoutesClaimAnOutcome: the operator's endpoints (metrics,
// stats, health, dashboard, the index page, admin) carry no
// X-Breakwater-Cache; a model-API request does.
func TestOnlyModelRoutesClaimAnOutcome(t *testing.T) {
	us := httptest.NewServer(&model{})
	defer us.Close()
	r := start(t, fmt.Sprintf(baseConfig, "0.93"), us.URL, us.URL)
	if code, h, body := r.chat(t, "is this counted"); code != http.StatusOK || h.Get("X-Breakwater-Cache") != "miss" {
		t.Fatalf("chat: %d, X-Breakwater-Cache %q, want 200 and miss: %s", code, h.Get("X-Breakwater-Cache"), body)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/metrics"}, {http.MethodGet, "/stats"}, {http.MethodGet, "/healthz"}, {http.MethodGet, "/readyz"},
		{http.MethodGet, "/dashboard"}, {http.MethodGet, "/"}, {http.MethodDelete, "/admin/cache"},
	} {
		req, _ := http.NewRequest(c.method, r.url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if v, ok := resp.Header["X-Breakwater-Cache"]; ok {
			t.Errorf("%s %s (%d): X-Breakwater-Cache %q, want none", c.method, c.path, resp.StatusCode, v)
		}
	}
}
