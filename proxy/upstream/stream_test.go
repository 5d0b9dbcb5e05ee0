package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// sse streams chunks, then [DONE] unless cut, pausing between chunks.
func sse(chunks int, pause time.Duration, cut bool) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		rc := http.NewResponseController(w)
		for i := range chunks {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"%d\"}}]}\n\n", i)
			rc.Flush()
			time.Sleep(pause)
		}
		if cut {
			panic(http.ErrAbortHandler) // drop the connection mid-stream
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func streamReq() *Request {
	r := chat("gpt-4o")
	r.Stream = true
	return r
}

func TestOpenRetriesUntilHeaders(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			always(500)(w, r, n)
			return
		}
		sse(3, 0, false)(w, r, n)
	})
	c := newCaller(t, oneTarget(up.url()))
	s, err := c.Open(t.Context(), streamReq())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got, want := s.Status, 200; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := s.Attempts, 2; got != want {
		t.Errorf("attempts = %d, want %d", got, want)
	}
	if got := statsOf(t, c, "gpt-4o", "a/*").Inflight; got != 1 {
		t.Errorf("inflight = %d while streaming, want 1", got)
	}
	lines, err := readLines(t, s)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if got, want := len(lines), 4; got != want || lines[3] != "data: [DONE]" {
		t.Errorf("lines = %q, want 3 chunks and [DONE]", lines)
	}
	s.Done(nil)
	s.Done(errors.New("ignored: second call"))
	ts := statsOf(t, c, "gpt-4o", "a/*")
	if ts.Inflight != 0 || ts.Success != 1 || ts.ServerError != 1 {
		t.Errorf("stats = inflight %d success %d server errors %d; want 0, 1, 1", ts.Inflight, ts.Success, ts.ServerError)
	}
}

func TestOpenCutStreamIsAFailure(t *testing.T) {
	up := startUpstream(t, sse(2, 0, true))
	opts := oneTarget(up.url())
	opts.Breaker = BreakerOptions{ConsecutiveFailures: 1, OpenFor: time.Minute}
	c := newCaller(t, opts)
	s, err := c.Open(t.Context(), streamReq())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, rerr := io.ReadAll(s.Body)
	if rerr == nil {
		t.Fatal("read the whole cut stream without an error")
	}
	s.Done(rerr)
	ts := statsOf(t, c, "gpt-4o", "a/*")
	if ts.ServerError != 1 || ts.Success != 0 {
		t.Errorf("stats = success %d server errors %d; want the cut counted as a failure", ts.Success, ts.ServerError)
	}
	if got, want := ts.State, "open"; got != want {
		t.Errorf("breaker = %s, want %s", got, want)
	}
}

func TestOpenBodyCloseReportsOutcome(t *testing.T) {
	tests := []struct {
		name        string
		readAll     bool
		wantSuccess uint64
	}{
		{"closed after the end", true, 1},
		{"closed early", false, 0}, // the reader gave up: no verdict
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, sse(3, 5*time.Millisecond, false))
			c := newCaller(t, oneTarget(up.url()))
			s, err := c.Open(t.Context(), streamReq())
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if tt.readAll {
				if _, err := io.ReadAll(s.Body); err != nil {
					t.Fatal(err)
				}
			}
			s.Body.Close()
			ts := statsOf(t, c, "gpt-4o", "a/*")
			if got, want := ts.Success, tt.wantSuccess; got != want {
				t.Errorf("success = %d, want %d", got, want)
			}
			if ts.Inflight != 0 || ts.ServerError != 0 {
				t.Errorf("inflight %d, server errors %d; want 0, 0", ts.Inflight, ts.ServerError)
			}
		})
	}
}

func TestOpenPassesClientErrorsThrough(t *testing.T) {
	up := startUpstream(t, always(400))
	c := newCaller(t, oneTarget(up.url()))
	s, err := c.Open(t.Context(), streamReq())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Done(nil)
	body, _ := io.ReadAll(s.Body)
	if got, want := s.Status, 400; got != want {
		t.Errorf("status = %d, want %d", got, want)
	}
	if got, want := string(body), `{"error":{"message":"status 400","type":"test"}}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	if got, want := up.count(), 1; got != want {
		t.Errorf("upstream calls = %d, want %d", got, want)
	}
}
