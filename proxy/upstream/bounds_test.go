package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// endless writes SSE chunks until the client goes away (or 20 s pass, so a
// broken test still ends).
func endless(w http.ResponseWriter, r *http.Request, _ int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	stop := time.After(20 * time.Second)
	for i := 0; ; i++ {
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		default:
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"%d\"}}]}\n\n", i)
		if rc.Flush() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The request deadline bounds the whole stream, not only the wait for its
// headers: an endless stream ends with ErrDeadline.
func TestOpenStreamEndsAtTheDeadline(t *testing.T) {
	up := startUpstream(t, endless)
	opts := oneTarget(up.url())
	opts.Retry = fastRetry
	opts.Retry.Deadline = time.Second // room for the headers on a busy CI core
	opts.MaxStreamDuration = 2 * time.Second
	c := newCaller(t, opts)
	start := time.Now()
	s, err := c.Open(t.Context(), streamReq())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	lines, err := readLines(t, s)
	s.Done(err)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("read %d lines, err = %v, want ErrDeadline", len(lines), err)
	}
	// The deadline bounds the wait for headers; the body runs on to the
	// stream's own limit, then ends (the upstream gives up at 20 s).
	if d := time.Since(start); d < 2*time.Second || d > 10*time.Second {
		t.Errorf("stream ended after %s, want at the 2s max duration, past the 1s deadline", d)
	}
	if len(lines) == 0 {
		t.Errorf("no lines before the deadline")
	}
	// The deadline is the request's, not the target's fault.
	if st := c.Snapshot()[0].Targets[0]; st.Timeout+st.ServerError != 0 {
		t.Errorf("a deadline cut counted against the target: %+v", st)
	}
}

// An answer longer than MaxAnswerBytes comes back as its first bytes plus a
// live Rest holding the remainder, byte for byte.
func TestDoHandsOverAnswerLongerThanMaxAnswerBytes(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(big)
	})
	opts := oneTarget(up.url())
	opts.MaxAnswerBytes = 64 << 10
	c := newCaller(t, opts)
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.Rest == nil {
		t.Fatalf("Rest = nil for a %d-byte answer over a %d-byte limit", len(big), opts.MaxAnswerBytes)
	}
	if got, limit := len(resp.Body), int(opts.MaxAnswerBytes); got > limit+1 {
		t.Errorf("buffered %d bytes, want at most %d", got, limit+1)
	}
	rest, err := io.ReadAll(resp.Rest)
	resp.Rest.Close()
	if err != nil {
		t.Fatalf("read rest: %v", err)
	}
	if got := append(resp.Body, rest...); !bytes.Equal(got, big) {
		t.Errorf("body + rest = %d bytes, want the %d sent", len(got), len(big))
	}
	small, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do after: %v", err)
	}
	if small.Rest != nil {
		small.Rest.Close()
	}
	if got := up.count(); got != 2 {
		t.Errorf("upstream calls = %d, want 2 (the slot of the first was released)", got)
	}
}

// A body that never ends is cut by the deadline too.
func TestDoEndlessBodyEndsAtTheDeadline(t *testing.T) {
	up := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(strings.Repeat(" ", 64<<10))
		rc := http.NewResponseController(w)
		stop := time.After(20 * time.Second)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
				return
			}
		}
	})
	opts := oneTarget(up.url())
	opts.Retry = fastRetry
	opts.Retry.Deadline = time.Second // room for the headers on a busy CI core
	opts.MaxAnswerBytes = 64 << 10
	c := newCaller(t, opts)
	start := time.Now()
	resp, err := c.Do(t.Context(), chat("gpt-4o"))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if resp.Rest == nil {
		t.Fatal("Rest = nil for an endless answer")
	}
	n, err := io.Copy(io.Discard, resp.Rest)
	resp.Rest.Close()
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("read %d bytes, err = %v, want ErrDeadline", n, err)
	}
	if d := time.Since(start); d > 10*time.Second { // the upstream gives up at 20 s
		t.Errorf("answer ended after %s, want about the 1s deadline", d)
	}
}
