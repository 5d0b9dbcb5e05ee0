package qdranttest

import (
	"strings"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// predicate reports whether a point passes a compiled filter.
type predicate func(p *point) bool

// compileFilter turns f into a predicate, or fails with codes.Unimplemented
// for any shape the fake does not evaluate. Compiling before looking at the
// data means an unsupported filter fails even on an empty collection. A nil
// or empty filter matches every point, as in Qdrant.
func compileFilter(f *qdrant.Filter) (predicate, error) {
	if f == nil {
		return func(*point) bool { return true }, nil
	}
	if f.MinShould != nil {
		return nil, unimplemented("filter.min_should")
	}
	must, err := compileConds(f.GetMust())
	if err != nil {
		return nil, err
	}
	should, err := compileConds(f.GetShould())
	if err != nil {
		return nil, err
	}
	mustNot, err := compileConds(f.GetMustNot())
	if err != nil {
		return nil, err
	}
	return func(p *point) bool {
		for _, c := range must {
			if !c(p) {
				return false
			}
		}
		for _, c := range mustNot {
			if c(p) {
				return false
			}
		}
		if len(should) == 0 {
			return true
		}
		for _, c := range should {
			if c(p) {
				return true
			}
		}
		return false
	}, nil
}

func compileConds(conds []*qdrant.Condition) ([]predicate, error) {
	out := make([]predicate, 0, len(conds))
	for _, c := range conds {
		p, err := compileCond(c)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func compileCond(c *qdrant.Condition) (predicate, error) {
	switch v := c.GetConditionOneOf().(type) {
	case *qdrant.Condition_Field:
		return compileField(v.Field)
	case *qdrant.Condition_Filter:
		return compileFilter(v.Filter)
	case *qdrant.Condition_HasId:
		ids := map[string]bool{}
		for _, id := range v.HasId.GetHasId() {
			k, _, err := idKey(id)
			if err != nil {
				return nil, err
			}
			ids[k] = true
		}
		return func(p *point) bool {
			k, _, _ := idKey(p.id)
			return ids[k]
		}, nil
	case *qdrant.Condition_IsEmpty:
		key, err := fieldKey(v.IsEmpty.GetKey())
		if err != nil {
			return nil, err
		}
		return func(p *point) bool { return isEmpty(p.payload[key]) }, nil
	case *qdrant.Condition_IsNull:
		key, err := fieldKey(v.IsNull.GetKey())
		if err != nil {
			return nil, err
		}
		return func(p *point) bool {
			val, ok := p.payload[key]
			return ok && isNull(val)
		}, nil
	case nil:
		return nil, status.Error(codes.InvalidArgument, "Wrong input: empty condition")
	default:
		return nil, unimplemented("condition %T", v)
	}
}

func compileField(fc *qdrant.FieldCondition) (predicate, error) {
	key, err := fieldKey(fc.GetKey())
	if err != nil {
		return nil, err
	}
	if fc.GeoBoundingBox != nil || fc.GeoRadius != nil || fc.GeoPolygon != nil || fc.ValuesCount != nil ||
		fc.DatetimeRange != nil || fc.IsEmpty != nil || fc.IsNull != nil {
		return nil, unimplemented("field condition on %q other than match or range", key)
	}
	switch {
	case fc.Match != nil && fc.Range != nil:
		return nil, unimplemented("field condition on %q with both match and range", key)
	case fc.Match != nil:
		m, err := compileMatch(fc.Match)
		if err != nil {
			return nil, err
		}
		return func(p *point) bool { return anyValue(p.payload[key], m) }, nil
	case fc.Range != nil:
		r := fc.Range
		return func(p *point) bool {
			return anyValue(p.payload[key], func(v *qdrant.Value) bool { return inRange(v, r) })
		}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "Wrong input: field condition on %q has no condition", key)
}

func compileMatch(m *qdrant.Match) (func(*qdrant.Value) bool, error) {
	switch v := m.GetMatchValue().(type) {
	case *qdrant.Match_Keyword:
		return func(x *qdrant.Value) bool {
			s, ok := x.GetKind().(*qdrant.Value_StringValue)
			return ok && s.StringValue == v.Keyword
		}, nil
	case *qdrant.Match_Integer:
		return func(x *qdrant.Value) bool {
			i, ok := x.GetKind().(*qdrant.Value_IntegerValue)
			return ok && i.IntegerValue == v.Integer
		}, nil
	case *qdrant.Match_Boolean:
		return func(x *qdrant.Value) bool {
			b, ok := x.GetKind().(*qdrant.Value_BoolValue)
			return ok && b.BoolValue == v.Boolean
		}, nil
	case *qdrant.Match_Keywords:
		set := map[string]bool{}
		for _, k := range v.Keywords.GetStrings() {
			set[k] = true
		}
		return func(x *qdrant.Value) bool {
			s, ok := x.GetKind().(*qdrant.Value_StringValue)
			return ok && set[s.StringValue]
		}, nil
	default:
		return nil, unimplemented("match %T", v)
	}
}

// anyValue applies f to a payload value, or to each element when the value is
// a list: Qdrant matches a condition on an array if any element matches.
func anyValue(v *qdrant.Value, f func(*qdrant.Value) bool) bool {
	if v == nil {
		return false
	}
	if l, ok := v.GetKind().(*qdrant.Value_ListValue); ok {
		for _, e := range l.ListValue.GetValues() {
			if f(e) {
				return true
			}
		}
		return false
	}
	return f(v)
}

func inRange(v *qdrant.Value, r *qdrant.Range) bool {
	var x float64
	switch k := v.GetKind().(type) {
	case *qdrant.Value_IntegerValue:
		x = float64(k.IntegerValue)
	case *qdrant.Value_DoubleValue:
		x = k.DoubleValue
	default:
		return false
	}
	return (r.Lt == nil || x < *r.Lt) && (r.Lte == nil || x <= *r.Lte) &&
		(r.Gt == nil || x > *r.Gt) && (r.Gte == nil || x >= *r.Gte)
}

func isNull(v *qdrant.Value) bool {
	_, ok := v.GetKind().(*qdrant.Value_NullValue)
	return ok
}

func isEmpty(v *qdrant.Value) bool {
	if v == nil || isNull(v) {
		return true
	}
	l, ok := v.GetKind().(*qdrant.Value_ListValue)
	return ok && len(l.ListValue.GetValues()) == 0
}

// fieldKey accepts top-level payload keys only; nested paths ("a.b", "a[]")
// are not implemented.
func fieldKey(k string) (string, error) {
	if k == "" {
		return "", status.Error(codes.InvalidArgument, "Wrong input: empty payload key")
	}
	if strings.ContainsAny(k, ".[]") {
		return "", unimplemented("nested payload key %q", k)
	}
	return k, nil
}

func unimplemented(format string, args ...any) error {
	return status.Errorf(codes.Unimplemented, "qdranttest: "+format+" is not implemented", args...)
}
