package flow

import (
	"context"
	"errors"
	"io"
	"maps"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/breakwater-dev/breakwater/proxy/flow/stored"
	"github.com/breakwater-dev/breakwater/proxy/upstream"
	"github.com/breakwater-dev/breakwater/proxy/wire"
)

const jsonType = "application/json"

// HeaderTokensSaved is sent on every answer served without an upstream
// call that spent tokens for it (hits, stale answers, coalesced JSON
// followers): "<input>,<output>", the usage of the answer it reused. The
// body's usage stays as the provider reported it, since it describes the
// answer; an app that bills from usage subtracts this.
const HeaderTokensSaved = "X-Breakwater-Tokens-Saved"

// setTokensSaved says on a response what it saved.
func setTokensSaved(h http.Header, u Usage) {
	if u.Known {
		h[HeaderTokensSaved] = []string{stored.SavedValue(u)}
	}
}

// NewID returns a random request or completion ID (128 bits, hex). IDs
// name requests, they guard nothing: math/rand/v2's generator (ChaCha8,
// seeded from the OS) is unpredictable enough and costs no system call per
// request, where crypto/rand did.
func NewID() string {
	return string(wire.AppendRandomHex(make([]byte, 0, 32), 16))
}

// blob writes a whole answer.
func blob(w http.ResponseWriter, status int, contentType string, body []byte) error {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// flush sends what w holds to the client, when it can.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// WriteError sends an error in the shape of f's API (nil f: the error object
// most clients parse). retryAfter > 0 adds Retry-After in whole seconds
// (rounded up, at least 1) because clients and SDKs only parse integers
// there.
func WriteError(w http.ResponseWriter, f Format, status int, code, message string, retryAfter time.Duration) error {
	if retryAfter > 0 {
		secs := int(math.Ceil(retryAfter.Seconds()))
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if f == nil {
		return blob(w, status, jsonType, wire.ErrorObjectJSON(status, code, message))
	}
	status, body := f.Error(status, code, message)
	return blob(w, status, jsonType, body)
}

// WriteUpstreamError turns an error of the caller into the response the
// client gets, in f's shape. Errors that are not the caller's typed error
// are 502.
func WriteUpstreamError(w http.ResponseWriter, f Format, err error) error {
	var ue *upstream.Error
	if errors.As(err, &ue) {
		w.Header().Set(HeaderAttempts, strconv.Itoa(ue.Attempts))
		// A budget's refusal (fleet.Exceeded) says its limit and what remains.
		var hs interface{ Headers() http.Header }
		if errors.As(err, &hs) {
			maps.Copy(w.Header(), hs.Headers())
		}
		return WriteError(w, f, ue.Status, ue.Code, ue.Message, ue.RetryAfter)
	}
	return WriteError(w, f, http.StatusBadGateway, "upstream_error", "breakwater: upstream call failed: "+err.Error(), 0)
}

// writeAnswer writes an upstream answer as it came: whole, or, longer than
// the caller's MaxAnswerBytes, as it arrives (WriteLong).
func writeAnswer(w http.ResponseWriter, resp *upstream.Response) error {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = jsonType
	}
	if resp.Rest != nil {
		return WriteLong(w, resp, ct)
	}
	return blob(w, resp.Status, ct, resp.Body)
}

// WriteLong writes an answer longer than the caller's MaxAnswerBytes as it
// arrives. When its body breaks off, the connection is aborted rather than
// ended cleanly, so the client sees a cut answer, never a short one.
func WriteLong(w http.ResponseWriter, resp *upstream.Response, contentType string) error {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(resp.Status)
	if _, err := w.Write(resp.Body); err != nil {
		return nil // the client went away
	}
	if _, err := io.Copy(w, resp.Rest); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// limit tells the hooks a request reached the bound of setting.
func (s *Flow) limit(setting string) {
	if h := s.opts.Hooks.Limit; h != nil {
		h(setting)
	}
}

// observeCall tells the hooks about one upstream call: the model it was
// sent as (requested when no target answered), its duration, the error type
// (the status of an upstream error, "" on success) and usage.
func (s *Flow) observeCall(f Format, requested string, resp *upstream.Response, err error, d time.Duration, u Usage) {
	h := s.opts.Hooks.Call
	if h == nil {
		return
	}
	model, errType := requested, ""
	switch {
	case err != nil:
		errType = StatusText(statusOf(err))
		if errors.Is(err, context.Canceled) {
			errType = "canceled"
		}
	case resp.Status >= 400:
		errType = StatusText(resp.Status)
	}
	if resp != nil && resp.Model != "" {
		model = resp.Model
	}
	h(f, model, d, errType, u)
}

// StatusText is an HTTP status as its three digits, without allocating a
// formatter.
func StatusText(status int) string {
	var b [3]byte
	b[0], b[1], b[2] = byte('0'+status/100%10), byte('0'+status/10%10), byte('0'+status%10)
	return string(b[:])
}

// Call sends an API's uncached request through the caller and relays its
// answer (wire.Host.Call): the answer's headers and Record as the cached
// flow's bypass.
func (s *Flow) Call(w http.ResponseWriter, r Request, endpoint string, ureq *upstream.Request) (*Record, error) {
	x := s.newExchange(w, &r)
	x.rec.Endpoint = endpoint
	err := s.call(x, ureq)
	return x.record(), err
}

func (s *Flow) call(x *exchange, ureq *upstream.Request) error {
	req := x.req
	ctl, err := parseControls(req.Header)
	if err != nil {
		return WriteError(x.w, x.format, http.StatusBadRequest, "invalid_header", "breakwater: "+err.Error(), 0)
	}
	ureq.Header = req.Header
	ureq.RequestID = req.Header.Get(HeaderRequestID)
	ureq.Class = ctl.class
	if ureq.Upstream == "" {
		ureq.Upstream = x.home
	}
	s.calls.Add(1)
	resp, err := s.opts.Caller.Do(req.Context(), ureq)
	x.rec.Called = true
	if err != nil {
		if req.Context().Err() != nil {
			x.end(OutcomeBypass, 499, 0, "")
			return nil
		}
		x.rec.Failed = true
		x.callFailed(err)
		x.end(OutcomeBypass, statusOf(err), 0, "")
		return WriteUpstreamError(x.w, x.format, err)
	}
	if resp.Rest != nil {
		defer resp.Rest.Close()
	}
	x.setCallHeaders(OutcomeBypass, resp.Target, resp.Attempts)
	x.rec.Tried = resp.Tried
	x.end(OutcomeBypass, resp.Status, 0, resp.Target)
	return writeAnswer(x.w, resp)
}
