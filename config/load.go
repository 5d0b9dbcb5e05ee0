package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/breakwater-dev/breakwater/lib/suggest"
)

// EnvPrefix starts every environment override: BREAKWATER_<SECTION>_<KEY>.
const EnvPrefix = "BREAKWATER_"

// Load reads the TOML file at path and returns a validated configuration.
//
// With path "", the configuration is Default() except that the "default"
// upstream's base_url is $BREAKWATER_UPSTREAM_URL when set. A file is decoded
// strictly (an unknown key is an error naming it and its line); keys it
// leaves out keep their defaults; a file without [[upstreams]] gets the same
// implicit "default" upstream.
//
// Then every scalar or list key of the sections (and default_upstream) can be
// overridden by BREAKWATER_<SECTION>_<KEY>, upper-cased with dots as
// underscores: BREAKWATER_CACHE_THRESHOLD=0.95,
// BREAKWATER_VECTOR_QDRANT_URL=qdrant:6334, BREAKWATER_RETRY_RETRY_ON=429,503.
// Lists are comma-separated; "[]" is the empty list. An empty variable counts
// as unset. [[upstreams]] and [[models]] have no overrides.
//
// env looks variables up (os.Getenv when nil); tests pass a map's lookup.
// The returned error is one line per problem, each naming the key.
func Load(path string, env func(string) string) (*Config, error) {
	c, err := LoadWithProblems(path, env)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// LoadWithProblems is Load that also returns the configuration when it is
// invalid (nil only when the file cannot be read or parsed), so that
// `breakwater -check` can check the environment too and list every problem
// in one run. A non-nil error means the configuration must not be used.
func LoadWithProblems(path string, env func(string) string) (*Config, error) {
	if env == nil {
		env = os.Getenv
	}
	// l.env maps keys whose value came from the environment to the
	// variable, so that an error about such a value names what to fix.
	l := &loaded{env: map[string]string{}}
	fromEnv := l.env
	var c *Config
	if path == "" {
		c = defaults()
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: read file: %w", err)
		}
		if c, err = decode(path, data, l); err != nil {
			return nil, err
		}
	}
	if len(c.Upstreams) == 0 {
		base := env(UpstreamURLEnv)
		if base == "" {
			base = DefaultUpstreamURL
		} else {
			fromEnv["upstreams[0].base_url"] = UpstreamURLEnv
		}
		c.Upstreams = []Upstream{implicitUpstream(base)}
	}
	envErr := applyEnv(c, env, l)
	c.applyRedisURLEnv(env, fromEnv)
	c.finish()
	// Every problem at once: bad overrides and invalid settings together.
	return c, errors.Join(envErr, errors.Join(l.errs...), c.validate(l))
}

// decode parses data over the defaults, strictly: the keys the file
// writes, each array entry over its defaults, with the one meaning of zero
// (file.go). l records the keys written as 0 and the negative values
// refused.
func decode(path string, data []byte, l *loaded) (*Config, error) {
	// A generic parse first: it reports syntax errors on their own, and
	// tells settle which keys the file writes.
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		return nil, decodeError(path, err, nil)
	}
	if err := checkRaw(path, reflect.TypeFor[Config](), raw, ""); err != nil {
		return nil, err
	}
	m := reflect.New(mirrorOf())
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(m.Interface()); err != nil {
		return nil, decodeError(path, err, raw)
	}
	c := defaults()
	l.settle(reflect.ValueOf(c).Elem(), m.Elem(), raw, "")
	return c, nil
}

// decodeError turns go-toml's errors into one line per problem:
// "config: FILE:LINE:COL: KEY: what is wrong". raw is the generic parse of
// the document, when there is one.
func decodeError(path string, err error, raw map[string]any) error {
	var missing *toml.StrictMissingError
	if errors.As(err, &missing) {
		errs := make([]error, 0, len(missing.Errors))
		for i := range missing.Errors {
			e := &missing.Errors[i]
			line, col := e.Position()
			key := []string(e.Key())
			hint := ""
			if rawHas(raw, key) {
				hint = unknownKeyHint(key)
			} else if len(key) > 0 {
				// go-toml drops the array's name for keys inside inline
				// tables of an array ("models.prio" for a target's "prio");
				// the line and column are right, the path is not.
				key = key[len(key)-1:]
			}
			errs = append(errs, fmt.Errorf("config: %s:%d:%d: unknown key %q%s",
				path, line, col, strings.Join(key, "."), hint))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		key := []string(de.Key())
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		// go-toml names Go types ("... into struct field ... of type int");
		// say what the key accepts instead.
		if rest, ok := strings.CutPrefix(msg, "cannot decode TOML "); ok {
			got, _, _ := strings.Cut(rest, " into ")
			if t, ok := typeAt(reflect.TypeFor[Config](), key); ok {
				msg = fmt.Sprintf("got a TOML %s, want %s", got, describe(t))
			}
		}
		if len(key) == 0 {
			return fmt.Errorf("config: %s:%d:%d: %s", path, line, col, msg)
		}
		return fmt.Errorf("config: %s:%d:%d: %s: %s", path, line, col, strings.Join(key, "."), msg)
	}
	return fmt.Errorf("config: %s: %w", path, err)
}

// rawHas reports whether the generic parse has key, in any entry of an
// array of tables.
func rawHas(raw any, key []string) bool {
	if len(key) == 0 {
		return true
	}
	switch v := raw.(type) {
	case map[string]any:
		next, ok := v[key[0]]
		return ok && rawHas(next, key[1:])
	case []any:
		return slices.ContainsFunc(v, func(e any) bool { return rawHas(e, key) })
	}
	return false
}

// unknownKeyHint suggests the closest allowed key of the same table, or
// lists the allowed keys when none is close.
func unknownKeyHint(key []string) string {
	if len(key) == 0 {
		return ""
	}
	parent, ok := typeAt(reflect.TypeFor[Config](), key[:len(key)-1])
	if ok && parent.Kind() == reflect.Slice {
		parent = parent.Elem()
	}
	if !ok || parent.Kind() != reflect.Struct {
		return ""
	}
	var names []string
	for _, f := range fields(parent) {
		names = append(names, f.Key)
	}
	bad := key[len(key)-1]
	if api, ok := strings.CutSuffix(bad, "_upstream"); ok && len(key) == 1 && slices.Contains(apiNames(), api) {
		// The per-API keys became one table.
		return fmt.Sprintf(" (an API's home upstream is set in the [api_upstreams] table: %s = \"<upstream>\")", api)
	}
	if best := suggest.Closest(strings.ToLower(bad), names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (allowed: " + strings.Join(names, ", ") + ")"
}

// typeAt follows a TOML key path through the Config type: struct fields by
// tag, slices to their element, maps consume one key part (the map key).
func typeAt(t reflect.Type, key []string) (reflect.Type, bool) {
	for len(key) > 0 {
		switch t.Kind() {
		case reflect.Slice:
			if t.Elem().Kind() != reflect.Struct {
				return nil, false
			}
			t = t.Elem()
		case reflect.Map:
			t, key = t.Elem(), key[1:]
		case reflect.Struct:
			f, ok := fieldByTag(t, key[0])
			if !ok {
				return nil, false
			}
			t, key = f.File, key[1:]
		default:
			return nil, false
		}
	}
	return t, true
}

// describe says in words what a key of type t accepts.
func describe(t reflect.Type) string {
	switch t {
	case durationType:
		return `a Go duration string such as "200ms", "5s" or "1m30s"`
	case sizeType:
		return `a byte count such as 4194304 or "4MiB"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of tables"
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(describe(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "a table"
	}
	return t.String()
}

// checkRaw refuses what go-toml would take silently or report without a
// line: an integer duration goes straight into the int64 under Duration
// ("timeout = 5" would mean 5ns), and a float size fails inside
// UnmarshalText with no key. It walks only keys that Config has.
func checkRaw(path string, t reflect.Type, raw any, key string) error {
	switch {
	case t == durationType:
		if _, ok := raw.(string); !ok {
			return fmt.Errorf("config: %s: %s = %v: %s", path, key, raw, durationHint)
		}
	case t == sizeType:
		switch raw.(type) {
		case string, int64:
		default:
			return fmt.Errorf("config: %s: %s = %v: %s", path, key, raw, sizeHint)
		}
	case t.Kind() == reflect.Struct:
		m, _ := raw.(map[string]any)
		for _, f := range fields(t) {
			v, ok := m[f.Key]
			if !ok {
				continue
			}
			if err := checkRaw(path, f.File, v, joinKey(key, f.Key)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		list, _ := raw.([]any)
		for i, v := range list {
			if err := checkRaw(path, t.Elem(), v, fmt.Sprintf("%s[%d]", key, i)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map:
		m, _ := raw.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if err := checkRaw(path, t.Elem(), m[k], key+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// envKey is one environment override: Name is the variable, Key the TOML
// key it sets, Index the field path in Config, Type how it is written
// (fileType).
type envKey struct {
	Name  string
	Key   string
	Index []int
	Type  reflect.Type
	field field
}

// envKeys lists every override, in struct order: every scalar and list key
// of the sections, recursively, and the top-level scalars. Arrays of tables
// and maps are skipped.
func envKeys() []envKey {
	var out []envKey
	var walk func(t reflect.Type, index []int, path []string)
	walk = func(t reflect.Type, index []int, path []string) {
		for _, f := range fields(t) {
			idx := append(slices.Clone(index), f.Index...)
			p := append(slices.Clone(path), f.Key)
			switch {
			case f.File != f.Type:
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, idx, p)
				continue
			case f.Type.Kind() == reflect.Map,
				f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				continue
			}
			out = append(out, envKey{
				Name:  EnvPrefix + strings.ToUpper(strings.Join(p, "_")),
				Key:   strings.Join(p, "."),
				Index: idx,
				Type:  f.File,
				field: f,
			})
		}
	}
	walk(reflect.TypeFor[Config](), nil, nil)
	return out
}

// applyEnv sets every key whose BREAKWATER_ variable is non-empty, records
// it in l.env (key → variable) and gives it the one meaning of zero.
func applyEnv(c *Config, env func(string) string, l *loaded) error {
	root := reflect.ValueOf(c).Elem()
	var errs []error
	for _, k := range envKeys() {
		s := env(k.Name)
		if s == "" {
			continue
		}
		l.env[k.Key] = k.Name
		v := root.FieldByIndex(k.Index)
		if err := setString(v, k.Type, s); err != nil {
			errs = append(errs, fmt.Errorf("config: %s = %q: %s must be %s", k.Name, s, k.Key, envDescribe(k.Type)))
			continue
		}
		l.settleZero(k.field, v, k.Key)
	}
	return errors.Join(errs...)
}

func envDescribe(t reflect.Type) string {
	if t.Kind() == reflect.Slice {
		return describe(t) + `, comma-separated ("[]" for none)`
	}
	return describe(t)
}

// setString parses s into v as a value of type file (fileType: a
// time.Duration is written as a Duration).
func setString(v reflect.Value, file reflect.Type, s string) error {
	s = strings.TrimSpace(s)
	if file != v.Type() {
		w := reflect.New(file).Elem()
		if err := setString(w, file, s); err != nil {
			return err
		}
		v.Set(w.Convert(v.Type()))
		return nil
	}
	if u, ok := v.Addr().Interface().(interface{ UnmarshalText([]byte) error }); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		if v.OverflowInt(n) {
			return strconv.ErrRange
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.Slice:
		list := reflect.MakeSlice(v.Type(), 0, 0)
		if s != "[]" {
			for part := range strings.SplitSeq(s, ",") {
				if part = strings.TrimSpace(part); part == "" {
					continue
				}
				elem := reflect.New(v.Type().Elem()).Elem()
				if err := setString(elem, elem.Type(), part); err != nil {
					return err
				}
				list = reflect.Append(list, elem)
			}
		}
		v.Set(list)
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// UnknownEnv returns one warning for every non-empty BREAKWATER_ variable of
// environ ("NAME=value" entries, as os.Environ gives them) that c does not
// read: neither a setting's override nor a variable a setting names (the
// upstream URL, the admin token, the partition secret, API keys). Overrides
// are looked up by exact name, so a misspelt one would otherwise be ignored
// in silence; the warning names the closest setting when one is near.
func (c *Config) UnknownEnv(environ []string) []string {
	keys := envKeys()
	known := map[string]bool{UpstreamURLEnv: true, RedisURLEnv: true}
	for _, k := range keys {
		known[k.Name] = true
	}
	for _, n := range []string{c.Server.AdminTokenEnv, c.Cache.PartitionSecretEnv,
		c.Vector.Qdrant.APIKeyEnv, c.Embed.OpenAI.APIKeyEnv} {
		known[n] = true
	}
	for _, u := range c.Upstreams {
		known[u.APIKeyEnv] = true
	}
	var out []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if name == UpstreamURLEnv && value != "" && !c.implicitUpstreamFrom(value) {
			out = append(out, fmt.Sprintf("config: environment variable %s is set but the config declares [[upstreams]], which take its place: it is ignored (set the base_url of an [[upstreams]] entry instead)", name))
			continue
		}
		if !strings.HasPrefix(name, EnvPrefix) || value == "" || known[name] {
			continue
		}
		w := fmt.Sprintf("config: environment variable %s is set but is not a setting and is ignored", name)
		if s := closestEnv(name, keys); s != "" {
			w += fmt.Sprintf(" (did you mean %s?)", s)
		}
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// implicitUpstreamFrom reports whether c's upstreams are the implicit one
// that Load builds from UpstreamURLEnv = baseURL (no [[upstreams]] in the file).
func (c *Config) implicitUpstreamFrom(baseURL string) bool {
	return len(c.Upstreams) == 1 && c.Upstreams[0].Name == defaultUpstreamName &&
		c.Upstreams[0].BaseURL == strings.TrimRight(baseURL, "/")
}

// closestEnv names the setting variable name most likely meant: the only one
// that ends with name's part after the prefix (BREAKWATER_LOG_LEVEL →
// BREAKWATER_SERVER_LOG_LEVEL), else one within an edit distance of 2, else "".
func closestEnv(name string, keys []envKey) string {
	rest := strings.TrimPrefix(name, EnvPrefix)
	var suffixed []string
	for _, k := range keys {
		if strings.HasSuffix(k.Name, "_"+rest) {
			suffixed = append(suffixed, k.Name)
		}
	}
	if len(suffixed) == 1 {
		return suffixed[0]
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return suggest.Closest(name, names)
}
