package upstream

// verdict is the request's own reading (Request.Classify) of a refused
// attempt; the zero Verdict without one. Its RetryAfter is the wait of this
// request only: a body names the quota of the key that sent it, so it never
// holds back the target for other keys.
func (k *call) verdict(r *result) Verdict {
	if k.req.Classify == nil || r.err != nil || r.resp == nil || r.resp.StatusCode < 400 {
		return Verdict{}
	}
	return k.req.Classify(r.resp.StatusCode, r.resp.Header, r.body)
}

// suffix is the verdict's reason as the final error message quotes it.
func (v Verdict) suffix() string {
	if v.Reason == "" {
		return ""
	}
	return " (" + v.Reason + ")"
}
