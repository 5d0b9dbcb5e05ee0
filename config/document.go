package config

// document is the file as it is decoded: Config over its defaults (a
// section's absent key keeps its default), with the entries of the arrays
// of tables decoded through types whose defaulted keys know their absence
// (a zero in Config cannot: max_queue = 0 is a choice, an absent max_queue
// is upstream.DefaultMaxQueue). go-toml flattens the embedded types, and
// the shallower field of a name wins, as in encoding/json.
type document struct {
	*Config
	Upstreams []documentUpstream `toml:"upstreams"`
	Models    []documentModel    `toml:"models,omitempty"`
}

type documentUpstream struct {
	Upstream
	Timeout        *Duration               `toml:"timeout"`
	MaxConcurrency *int                    `toml:"max_concurrency"`
	MaxQueue       *int                    `toml:"max_queue"`
	Pools          map[string]documentPool `toml:"pools,omitempty"`
}

type documentPool struct {
	MaxConcurrency *int `toml:"max_concurrency"`
	MaxQueue       *int `toml:"max_queue"`
}

type documentModel struct {
	Model
	Targets []documentTarget `toml:"targets"`
}

type documentTarget struct {
	Target
	Weight *float64 `toml:"weight"`
}

// config returns the Config the document holds: each entry's absent key
// at its default (a pool's at its upstream's).
func (d *document) config() *Config {
	c := d.Config
	c.Upstreams = each(d.Upstreams, documentUpstream.upstream)
	c.Models = each(d.Models, documentModel.model)
	return c
}

func (f documentUpstream) upstream() Upstream {
	u := f.Upstream
	u.Timeout = or(f.Timeout, defaultUpstreamTimeout)
	u.MaxConcurrency = or(f.MaxConcurrency, defaultMaxConcurrency)
	u.MaxQueue = or(f.MaxQueue, defaultMaxQueue)
	if f.Pools != nil {
		u.Pools = make(map[string]Pool, len(f.Pools))
		for class, p := range f.Pools {
			u.Pools[class] = Pool{MaxConcurrency: or(p.MaxConcurrency, u.MaxConcurrency), MaxQueue: or(p.MaxQueue, u.MaxQueue)}
		}
	}
	return u
}

func (f documentModel) model() Model {
	m := f.Model
	m.Targets = each(f.Targets, func(t documentTarget) Target {
		t.Target.Weight = or(t.Weight, defaultTargetWeight)
		return t.Target
	})
	return m
}

// each is f of every element of in (nil for none).
func each[S, T any](in []S, f func(S) T) []T {
	var out []T
	for _, e := range in {
		out = append(out, f(e))
	}
	return out
}

// or is *p, or def when the key was absent.
func or[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
