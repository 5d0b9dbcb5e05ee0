package sim

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-listen", addr, "-latency", "1ms", "-jitter", "0", "-tpm", "1000"}, &out, &errb)
	}()
	var resp *http.Response
	for range 100 {
		resp, err = http.Get("http://" + addr + "/sim/stats")
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("stats status = %d, want %d", got, want)
	}
	// -tpm sets the OpenAI-shaped token budget.
	chat, _ := post(t, "http://"+addr+"/v1/chat/completions", chatBody("How do tides work?", false))
	if got := chat.Header.Get("x-ratelimit-limit-tokens"); got != "1000" {
		t.Errorf("x-ratelimit-limit-tokens = %q with -tpm 1000", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v (stderr %s)", err, errb.String())
	}
	if !strings.Contains(out.String(), "http://"+addr+"/v1") || !strings.Contains(out.String(), "1000 tokens") {
		t.Errorf("banner = %q, want the base URL", out.String())
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-dist", "gamma"}, {"-error-rate", "2"}, {"extra"}, {"-steps", "5s"}, {"-steps", "5s:2,1s:8"}, {"-steps", "x:1"}, {"-refuse-first", "-1"}, {"-tpm", "-1"}, {"-otpm", "-5"}, {"-burst", "0s"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := Run(t.Context(), args, &out, &errb); err == nil {
				t.Errorf("Run(%q) = nil, want an error", args)
			}
		})
	}
}

func TestParseSteps(t *testing.T) {
	got, err := ParseSteps("5s:2, 10s:8")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{After: 5 * time.Second, Capacity: 2}, {After: 10 * time.Second, Capacity: 8}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ParseSteps = %+v, want %+v", got, want)
	}
	if got, err := ParseSteps(""); err != nil || got != nil {
		t.Errorf("ParseSteps(\"\") = %v, %v; want none", got, err)
	}
}
