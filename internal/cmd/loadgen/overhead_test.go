package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestOverhead(t *testing.T) {
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"choices":[]}`))
	}))
	defer direct.Close()
	proxy := cacheServer(5 * time.Millisecond) // a miss costs 5 ms more than direct; a repeat hits
	defer proxy.Close()

	var out, log bytes.Buffer
	err := Overhead(context.Background(), []string{
		"-target", "direct=" + direct.URL,
		"-target", "proxy=" + proxy.URL + "/v1",
		"-c", "1,2", "-d", "300ms", "-warm", "0s",
	}, &out, &log)
	if err != nil {
		t.Fatalf("Overhead: %v\n%s", err, log.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 13 || strings.TrimSpace(f[1]) == "path" || strings.HasPrefix(strings.TrimSpace(f[1]), "-") {
			continue
		}
		cols := make([]string, 0, 12)
		for _, c := range f[1:13] {
			cols = append(cols, strings.TrimSpace(c))
		}
		rows[cols[0]+"/"+cols[1]+"/"+cols[2]] = cols
	}
	if len(rows) != 8 {
		t.Fatalf("want 8 rows (2 paths × 2 levels × 2 targets), got %d:\n%s", len(rows), out.String())
	}
	for _, c := range []string{"1", "2"} {
		miss := rows["miss/"+c+"/proxy"]
		var added float64
		if _, err := fmt.Sscanf(miss[6], "%f ms", &added); err != nil || added < 2.5 {
			t.Errorf("miss c=%s: p50 added %q, want ≥ 2.5 ms (the proxy's 5 ms)", c, miss[6])
		}
		if miss[10] != "0%" || miss[11] != "0" {
			t.Errorf("miss c=%s: cache hits %q errors %q, want 0%% and 0", c, miss[10], miss[11])
		}
		if hit := rows["hit/"+c+"/proxy"]; hit[10] != "100%" {
			t.Errorf("hit c=%s: cache hits %q, want 100%%", c, hit[10])
		}
		if base := rows["miss/"+c+"/direct"]; base[6] != "" || base[10] != "–" {
			t.Errorf("baseline row c=%s has added %q hits %q, want both empty", c, base[6], base[10])
		}
	}
}

func TestOverheadFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-target", "only=http://127.0.0.1:1"},
		{"-target", "a=http://127.0.0.1:1", "-target", "b=http://127.0.0.1:2", "-c", "0"},
		{"-target", "a=http://127.0.0.1:1", "-target", "nourl"},
		{"-target", "a=http://127.0.0.1:1", "-target", "b=http://127.0.0.1:2|NoValue"},
	} {
		var out, log bytes.Buffer
		if err := Overhead(context.Background(), args, &out, &log); err == nil {
			t.Errorf("Overhead(%q) = nil, want a flag error", args)
		}
	}
}
