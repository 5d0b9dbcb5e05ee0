package upstream

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A request's Classify is honoured: the wait its verdict names separates the
// attempts, and NoRetrySameTarget sends the request to the next target at
// once, its reason quoted in the error when nothing else answers.
func TestClassifyVerdict(t *testing.T) {
	const wait = 150 * time.Millisecond
	t.Run("retry after the body's delay", func(t *testing.T) {
		a := startUpstream(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				reply(w, 429, `{"error":{"status":"RESOURCE_EXHAUSTED"}}`)
				return
			}
			ok(w, r, n)
		})
		c := newCaller(t, oneTarget(a.url()))
		req := chat("gpt-4o")
		req.Classify = func(status int, _ http.Header, body []byte) Verdict {
			return Verdict{Congestion: true, RetryAfter: wait}
		}
		if _, err := c.Do(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		calls := a.calls()
		if len(calls) != 2 {
			t.Fatalf("%d attempts, want 2", len(calls))
		}
		if gap := calls[1].at.Sub(calls[0].at); gap < wait {
			t.Errorf("second attempt %s after the first, want at least the %s the body asked for", gap, wait)
		}
	})
	t.Run("no retry on the same target", func(t *testing.T) {
		quota := func(w http.ResponseWriter, _ *http.Request, _ int) {
			reply(w, 429, `{"error":{"status":"RESOURCE_EXHAUSTED","message":"daily"}}`)
		}
		classify := func(status int, _ http.Header, body []byte) Verdict {
			if strings.Contains(string(body), "daily") {
				return Verdict{Congestion: true, NoRetrySameTarget: true, RetryAfter: time.Hour, Reason: "daily quota Q exhausted"}
			}
			return Verdict{}
		}
		a := startUpstream(t, quota)
		b := startUpstream(t, ok)
		c := newCaller(t, twoTargets(a.url(), b.url()))
		req := chat("gpt-4o")
		req.Classify = classify
		start := time.Now()
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if a.count() != 1 || b.count() != 1 || resp.Model != "gpt-4o-mini" {
			t.Errorf("attempts a=%d b=%d, answered by %s; want one each, b answering", a.count(), b.count(), resp.Model)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("fallback took %s: the hour-long delay was waited for", d)
		}

		solo := startUpstream(t, quota)
		c = newCaller(t, oneTarget(solo.url()))
		_, err = c.Do(context.Background(), req)
		var ue *Error
		if !errors.As(err, &ue) || ue.Status != 429 || !strings.Contains(ue.Message, "daily quota Q exhausted") {
			t.Fatalf("err = %v, want a 429 naming the quota", err)
		}
		if solo.count() != 1 {
			t.Errorf("%d attempts on a spent daily quota, want 1", solo.count())
		}
		// The body's hour, within retry.retry_after_cap.
		if ue.RetryAfter != DefaultRetryAfterCap {
			t.Errorf("RetryAfter = %s, want the body's hour capped at %s", ue.RetryAfter, DefaultRetryAfterCap)
		}
	})
}
