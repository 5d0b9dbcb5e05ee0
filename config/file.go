package config

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/breakwater-dev/breakwater/proxy/upstream"
)

// The sections that a library's options type can hold are that type (or
// embed it): its fields carry the keys (toml tags), the comments operators
// read, and its Validate the rules. This file is how config reads a file
// into them:
//   - keys are the toml tags, an untagged embedded struct's keys counting as
//     its parent's (fields);
//   - a time.Duration is written as a Go duration string and a field tagged
//     unit:"bytes" as a byte count or a size string: the file is decoded
//     into a mirror of Config whose such fields are Duration and Size
//     (fileType), so go-toml reports every error with its line, and the
//     mirror's values are copied into Config (settle);
//   - the one meaning of zero (settleZero): a key the file (or the
//     environment) writes as 0 and whose field is tagged zero:"…" reaches
//     the option as its negative value: "none" for a key whose tag says
//     what 0 means (zero:"0: no limit"; a negative value written there is
//     refused), a value the option's Validate refuses for zero:"refused".
//     A key left out keeps its default.

var (
	durationType = reflect.TypeFor[Duration]()
	sizeType     = reflect.TypeFor[Size]()
	timeDuration = reflect.TypeFor[time.Duration]()
)

// The tags beside toml that config reads, and the zero tag's value for a
// key without "none".
const (
	zeroTag     = "zero"
	unitTag     = "unit"
	refusedZero = "refused"
)

// field is one key of a struct type: Index leads to it from the struct,
// through embedded structs; File is the type the file writes it as.
type field struct {
	reflect.StructField
	Key  string
	File reflect.Type
}

// fields lists the keys of struct type t in field order: its tagged
// fields, and the keys of an untagged embedded struct as its own.
func fields(t reflect.Type) []field {
	var out []field
	for f := range t.Fields() {
		name := tomlName(f)
		switch {
		case !f.IsExported() || f.Tag.Get("toml") == "-":
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for _, sub := range fields(f.Type) {
				sub.Index = append([]int{f.Index[0]}, sub.Index...)
				out = append(out, sub)
			}
		case name != "":
			out = append(out, field{StructField: f, Key: name, File: fileType(f)})
		}
	}
	return out
}

// tomlName is f's key: its toml tag's name, "" for none or "-".
func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// fileType is how the file writes f: a Duration for a time.Duration, a
// Size for a byte count.
func fileType(f reflect.StructField) reflect.Type {
	switch {
	case f.Type == timeDuration:
		return durationType
	case f.Tag.Get(unitTag) == "bytes":
		return sizeType
	}
	return f.Type
}

// fieldByTag finds the field of t whose key is name.
func fieldByTag(t reflect.Type, name string) (field, bool) {
	for _, f := range fields(t) {
		if f.Key == name {
			return f, true
		}
	}
	return field{}, false
}

// mirrorOf is t with every field as the file writes it (fileType), the
// embedded structs' fields flattened: what go-toml decodes the file into.
var mirrorOf = sync.OnceValue(func() reflect.Type { return mirror(reflect.TypeFor[Config]()) })

func mirror(t reflect.Type) reflect.Type {
	switch t.Kind() {
	case reflect.Struct:
		fs := fields(t)
		out := make([]reflect.StructField, len(fs))
		for i, f := range fs {
			ft := f.File
			if ft == f.Type {
				ft = mirror(f.Type)
			}
			out[i] = reflect.StructField{Name: f.Name, Type: ft, Tag: f.Tag}
		}
		return reflect.StructOf(out)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return reflect.SliceOf(mirror(t.Elem()))
		}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Struct {
			return reflect.MapOf(t.Key(), mirror(t.Elem()))
		}
	}
	return t
}

// entryDefault is an array entry's value before the file's keys are
// read over it: the library's defaults of an entry.
func entryDefault(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch p := v.Addr().Interface().(type) {
	case *Upstream:
		p.Upstream = upstream.UpstreamDefaults()
	case *Target:
		*p = upstream.TargetDefaults()
	}
	return v
}

// loaded is what Load knows of where each value came from: the keys set
// from the environment (key → variable) and the keys written as 0 that
// hold their option's negative value (so that a message shows the 0).
type loaded struct {
	env   map[string]string
	zeros map[string]bool
	errs  []error
}

// settle copies the keys raw (the generic parse) holds from src (the
// decoded mirror) into dst, starting each array entry at its defaults.
func (l *loaded) settle(dst, src reflect.Value, raw any, key string) {
	switch dst.Kind() {
	case reflect.Struct:
		m, _ := raw.(map[string]any)
		for _, f := range fields(dst.Type()) {
			v, ok := m[f.Key]
			if !ok {
				continue
			}
			k := joinKey(key, f.Key)
			d, s := dst.FieldByIndex(f.Index), src.FieldByName(f.Name)
			if isTable(f.Type) {
				l.settle(d, s, v, k)
				continue
			}
			d.Set(s.Convert(d.Type()))
			l.settleZero(f, d, k)
		}
	case reflect.Slice:
		list, _ := raw.([]any)
		out := reflect.MakeSlice(dst.Type(), len(list), len(list))
		for i := range list {
			e := out.Index(i)
			e.Set(entryDefault(e.Type()))
			l.settle(e, src.Index(i), list[i], fmt.Sprintf("%s[%d]", key, i))
		}
		dst.Set(out)
	case reflect.Map:
		m, _ := raw.(map[string]any)
		out := reflect.MakeMapWithSize(dst.Type(), len(m))
		for k, v := range m {
			e := entryDefault(dst.Type().Elem())
			l.settle(e, src.MapIndex(reflect.ValueOf(k)), v, key+"."+k)
			out.SetMapIndex(reflect.ValueOf(k), e)
		}
		dst.Set(out)
	}
}

// isTable reports whether t is a table of keys, or an array or map of
// them, rather than a value.
func isTable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Map:
		return t.Elem().Kind() == reflect.Struct
	}
	return false
}

// settleZero gives the key just set (v, from the file or the environment)
// the one meaning of zero (see the top of this file).
func (l *loaded) settleZero(f field, v reflect.Value, key string) {
	tag, ok := f.Tag.Lookup(zeroTag)
	if !ok {
		return
	}
	delete(l.zeros, key)
	switch {
	case isZeroNumber(v):
		if l.zeros == nil {
			l.zeros = map[string]bool{}
		}
		l.zeros[key] = true
		setNumber(v, -1)
	case tag != refusedZero && isNegative(v):
		l.errs = append(l.errs, &Error{Key: key, Value: v.Interface(), Problem: "must be >= 0 (" + tag + ")", Env: l.env[key]})
	}
}

func isZeroNumber(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float32, reflect.Float64:
		return v.IsZero()
	}
	return false
}

func isNegative(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return v.Int() < 0
	case reflect.Float32, reflect.Float64:
		return v.Float() < 0
	}
	return false
}

func setNumber(v reflect.Value, n int64) {
	if k := v.Kind(); k == reflect.Float32 || k == reflect.Float64 {
		v.SetFloat(float64(n))
		return
	}
	v.SetInt(n)
}

// Marshal writes c as a configuration file that Loads back to c: durations
// and sizes as strings, and a key whose option holds "none" (a negative
// value, zero:"…") as the file's 0.
func (c *Config) Marshal() ([]byte, error) {
	m := reflect.New(mirrorOf()).Elem()
	toFile(m, reflect.ValueOf(c).Elem())
	return toml.Marshal(m.Interface())
}

// toFile is settle's inverse: every field of src into the mirror dst.
func toFile(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Struct:
		for _, f := range fields(src.Type()) {
			d, s := dst.FieldByName(f.Name), src.FieldByIndex(f.Index)
			if isTable(f.Type) {
				toFile(d, s)
				continue
			}
			d.Set(s.Convert(d.Type()))
			if _, ok := f.Tag.Lookup(zeroTag); ok && isNegative(d) {
				setNumber(d, 0)
			}
		}
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		out := reflect.MakeSlice(dst.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			toFile(out.Index(i), src.Index(i))
		}
		dst.Set(out)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		out := reflect.MakeMapWithSize(dst.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			e := reflect.New(dst.Type().Elem()).Elem()
			toFile(e, it.Value())
			out.SetMapIndex(it.Key(), e)
		}
		dst.Set(out)
	}
}
