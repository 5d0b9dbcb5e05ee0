package upstream

// boundTo keeps the targets of route r on up, the upstream
// Request.BindUpstream names; when there are none (the default route, or a
// route without a target there), the request goes to up with the requested
// model, as a model no route lists goes to its upstream. Another upstream
// would answer 404 for the state the request continues
// (https://platform.openai.com/docs/guides/conversation-state).
func (k *call) boundTo(r *route, up *upstream) [][]*member {
	if r != k.c.def {
		if out := k.sameUpstream(r.groups, up); len(out) > 0 {
			return out
		}
	}
	return [][]*member{{k.c.boundMember(up, k.req.Model)}}
}

// boundMember is the member for model on up when no target of the route is
// there: the one a model no route lists gets (defaultMember), made here when
// there is no default upstream.
func (c *Caller) boundMember(up *upstream, model string) *member {
	if c.def != nil {
		return c.defaultMember(up.cfg.Name, model)
	}
	mt := &c.models
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if model == "" || len(model) > maxModelName || len(mt.all) >= maxModelTargets && mt.by[modelKey{up.cfg.Name, model}] == nil {
		return c.memberLocked(Target{Upstream: up.cfg.Name}, up)
	}
	return c.memberLocked(Target{Upstream: up.cfg.Name, Model: model}, up)
}
