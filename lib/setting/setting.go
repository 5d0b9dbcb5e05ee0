// Package setting is how a library option reports an invalid value: the
// field by its configuration key, the value and what is allowed, one line
// each. A library's options type validates itself with it (Validate), as
// Caddy's modules and CoreDNS's plugins do, so that a rule is written once,
// beside the field and its Default…; the config package names the same
// keys and adds only what the file and the environment bring (the variable
// a value came from, the file's one meaning of zero).
package setting

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error is one invalid option: Key is its configuration key, with indices
// for array entries ("models[0].targets[1].upstream"); Value the offending
// value (an empty string reads "is empty"); Problem what is allowed.
type Error struct {
	Key     string
	Value   any
	Problem string
}

// Error formats e as "KEY = VALUE: PROBLEM" (see Format).
func (e *Error) Error() string { return Format(e.Key, e.Value, e.Problem) }

// Format writes one invalid setting as one line: `key = "text": problem`,
// `key is empty: problem`, `key = ["a", "b"]: problem`, `key = 3: problem`.
func Format(key string, value any, problem string) string {
	switch v := value.(type) {
	case string:
		if v == "" {
			return fmt.Sprintf("%s is empty: %s", key, problem)
		}
		return fmt.Sprintf("%s = %q: %s", key, v, problem)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = strconv.Quote(s)
		}
		return fmt.Sprintf("%s = [%s]: %s", key, strings.Join(q, ", "), problem)
	default:
		return fmt.Sprintf("%s = %v: %s", key, v, problem)
	}
}

// Errors collects the problems of one Validate, in field order.
type Errors []error

// Add records that key's value is not allowed; problem is a format for args.
func (es *Errors) Add(key string, value any, problem string, args ...any) {
	*es = append(*es, &Error{Key: key, Value: value, Problem: fmt.Sprintf(problem, args...)})
}

// number is what the range helpers judge.
type number interface {
	~int | ~int64 | ~float32 | ~float64
}

// Negative records that key may not hold v when v is negative (an
// option's zero being its default, a negative value is the one to
// refuse); problem says what is allowed.
func Negative[T number](es *Errors, key string, v T, problem string) {
	if v < 0 {
		es.Add(key, v, "%s", problem)
	}
}

// Outside records that key may not hold v when v is not in [lo, hi] (NaN
// included); problem says what is allowed.
func Outside[T number](es *Errors, key string, v, lo, hi T, problem string) {
	if !(v >= lo && v <= hi) {
		es.Add(key, v, "%s", problem)
	}
}

// Err returns every problem joined (errors.Join), nil when there is none.
func (es Errors) Err() error { return errors.Join(es...) }

// List returns the problems in err, one per line: the errors an
// errors.Join holds, or err itself; nil for nil.
func List(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
