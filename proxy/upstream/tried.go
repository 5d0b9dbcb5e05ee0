package upstream

// step is the Step of an attempt's result r at target.
func (r *result) step(target string) Step {
	s := Step{Target: target, Status: statusOf(r.resp), Limit: r.limit, Reason: r.reason}
	if r.err != nil && s.Reason == "" {
		s.Reason = r.out.String()
	}
	if s.Status != 0 {
		s.Reason = ""
	}
	return s
}
