package filter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Match reports whether a payload (a JSON document's text) matches f. It
// is the reference evaluator: routing runs the compiled form (JSONPath) in
// Postgres, and TestJSONPathAgreesWithMatch holds the two to the same
// answers. The dashboard tries filters with it.
func (f *Filter) Match(payload []byte) (bool, error) {
	doc, err := DecodePayload(payload)
	if err != nil {
		return false, err
	}
	return f.root.match(doc), nil
}

// DecodePayload decodes a payload as Match reads it: objects as
// map[string]any (a repeated key keeps its last value, as jsonb does),
// numbers as json.Number.
func DecodePayload(payload []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	return doc, nil
}

// MatchDoc is Match on a payload already decoded by DecodePayload.
func (f *Filter) MatchDoc(doc any) bool { return f.root.match(doc) }

func (n all) match(doc any) bool {
	for _, sub := range n {
		if !sub.match(doc) {
			return false
		}
	}
	return true
}

func (n anyOf) match(doc any) bool {
	for _, sub := range n {
		if sub.match(doc) {
			return true
		}
	}
	return false
}

func (n not) match(doc any) bool { return !n.n.match(doc) }

// match applies the operator to the value at the path. A missing path
// matches only $ne, $nin and $exists: false.
func (c cond) match(doc any) bool {
	v, ok := lookup(doc, c.path)
	switch c.op {
	case "$exists":
		return ok == c.arg.(bool)
	case "$ne":
		return !ok || !equal(v, c.arg)
	case "$nin":
		return !ok || !in(v, c.arg.([]any))
	}
	if !ok {
		return false
	}
	switch c.op {
	case "$eq":
		return equal(v, c.arg)
	case "$in":
		return in(v, c.arg.([]any))
	case "$prefix":
		s, ok := v.(string)
		return ok && strings.HasPrefix(s, c.arg.(string))
	}
	cmp, ok := compare(v, c.arg)
	if !ok {
		return false
	}
	switch c.op {
	case "$gt":
		return cmp > 0
	case "$gte":
		return cmp >= 0
	case "$lt":
		return cmp < 0
	default: // $lte
		return cmp <= 0
	}
}

// lookup finds the value at a path: each segment names a member of an
// object or, when it is an index (isIndex), an element of an array.
// Arrays are never searched: "items.sku" is missing when items is an
// array.
func lookup(doc any, path []string) (any, bool) {
	v := doc
	for _, seg := range path {
		switch t := v.(type) {
		case map[string]any:
			next, ok := t[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := index(seg)
			if !ok || i >= len(t) {
				return nil, false
			}
			v = t[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func index(seg string) (int, bool) {
	if !isIndex(seg) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(seg); i++ {
		n = n*10 + int(seg[i]-'0')
	}
	return n, true
}

// equal is JSON equality: numbers by value, objects by their members
// whatever their order, arrays element by element; values of different
// kinds are never equal.
func equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && compareDecimals(parseDecimal(x), parseDecimal(y)) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

func in(v any, list []any) bool {
	for _, el := range list {
		if equal(v, el) {
			return true
		}
	}
	return false
}

// compare orders two numbers by value or two strings by their bytes
// (Unicode code points); any other pair does not compare.
func compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return 0, false
		}
		return compareDecimals(parseDecimal(x), parseDecimal(y)), true
	case string:
		y, ok := b.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(x, y), true
	default:
		return 0, false
	}
}
