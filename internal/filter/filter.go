// Package filter is the language of subscription payload filters: a JSON
// object matched against an event's payload, so that a subscription makes
// a delivery only for the events it wants.
//
//	{"customer.tier": "gold", "total": {"$gte": 100}}
//	{"$or": [{"items.0.sku": {"$prefix": "BK-"}}, {"gift": true}]}
//
// A key is a dotted path into the payload or one of the combinators $and,
// $or (non-empty arrays of filters) and $not (a filter); several keys are
// all required. A path's value is a literal, which the value at the path
// must equal, or an object of operators ($eq, $ne, $in, $nin, $gt, $gte,
// $lt, $lte, $exists, $prefix). Parse validates a filter as a
// subscription is written; Filter.Match is the reference evaluator, and
// Filter.JSONPath compiles the filter to the Postgres jsonpath predicate
// that routing evaluates (jsonb_path_match) in the statement that makes
// deliveries. TestJSONPathAgreesWithMatch holds the two to the same
// answers. The rules are documented in docs/api.md ("Payload filters").
package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/textcheck"
)

// Limits on a filter.
const (
	// MaxBytes bounds a filter's text, without insignificant whitespace.
	MaxBytes = 4 << 10
	// MaxDepth bounds the nesting of a filter's objects and arrays, and the
	// segments of one path.
	MaxDepth = 32
	// MaxIndexSegments bounds the segments of digits in one path: each may
	// name an array element or an object member, and the jsonpath of a
	// path doubles with each one (Filter.JSONPath).
	MaxIndexSegments = 4
	// maxIndexDigits is the longest segment read as an array index; a
	// longer run of digits can only name an object member.
	maxIndexDigits = 9
	// maxCompiled bounds the compiled jsonpath; a filter within MaxBytes
	// reaches it only with many index segments.
	maxCompiled = 64 << 10
)

// Error is a filter refused by Parse: where, and why. Path names the place
// in the filter, such as "$and[1].customer.tier.$gt"; it is "" for the
// whole filter.
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "filter " + e.Msg
	}
	return "filter: " + e.Path + ": " + e.Msg
}

// Filter is a parsed, valid filter.
type Filter struct {
	text string // compact JSON
	root node
	path string // compiled jsonpath
}

// Parse reads and validates a filter. A refused filter is an *Error. The
// filter's text is kept as written, without insignificant whitespace
// (Filter.String).
func Parse(raw []byte) (*Filter, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, &Error{Msg: "is not valid JSON: " + err.Error()}
	}
	if compact.Len() > MaxBytes {
		return nil, &Error{Msg: fmt.Sprintf("is %d bytes; a filter may be at most %d", compact.Len(), MaxBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.UseNumber()
	v, err := decodeValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(object)
	if !ok {
		return nil, &Error{Msg: "must be a JSON object, not " + kindOf(v)}
	}
	root, err := parseFilter(obj, "")
	if err != nil {
		return nil, err
	}
	f := &Filter{text: compact.String(), root: root}
	f.path = "strict " + root.jsonpath()
	if len(f.path) > maxCompiled {
		return nil, &Error{Msg: fmt.Sprintf("is too complex to route by (its jsonpath would be %d bytes, more than %d): use fewer paths with segments of digits", len(f.path), maxCompiled)}
	}
	return f, nil
}

// String is the filter's JSON text.
func (f *Filter) String() string { return f.text }

// JSONPath is the filter as a Postgres jsonpath predicate, in strict mode:
// jsonb_path_match(payload, path) is true exactly when Match is. Each part
// of it is true or false, never unknown, whatever the payload holds.
func (f *Filter) JSONPath() string { return f.path }

// object is a JSON object as written: its keys in order.
type object struct {
	keys []string
	vals []any
}

// decodeValue reads one JSON value: an object as an object, an array as
// []any, a number as json.Number. It refuses duplicate keys, NUL
// characters (Postgres text holds none), numbers Postgres cannot hold, and
// nesting deeper than MaxDepth. loc names the value in errors.
func decodeValue(dec *json.Decoder, loc string, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, &Error{Path: loc, Msg: "is not valid JSON: " + err.Error()}
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth+1 > MaxDepth {
			return nil, &Error{Path: loc, Msg: fmt.Sprintf("nests deeper than %d levels", MaxDepth)}
		}
		if t == '[' {
			arr := []any{}
			for dec.More() {
				v, err := decodeValue(dec, indexLoc(loc, len(arr)), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, closeErr(err, loc)
		}
		var obj object
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, &Error{Path: loc, Msg: "is not valid JSON: " + err.Error()}
			}
			key, _ := kt.(string)
			if msg := textcheck.String(key); msg != "" {
				return nil, &Error{Path: loc, Msg: "has a key that " + msg}
			}
			for _, k := range obj.keys {
				if k == key {
					return nil, &Error{Path: keyLoc(loc, key), Msg: "appears twice in the same object"}
				}
			}
			v, err := decodeValue(dec, keyLoc(loc, key), depth+1)
			if err != nil {
				return nil, err
			}
			obj.keys, obj.vals = append(obj.keys, key), append(obj.vals, v)
		}
		_, err := dec.Token()
		return obj, closeErr(err, loc)
	case string:
		if msg := textcheck.String(t); msg != "" {
			return nil, &Error{Path: loc, Msg: "holds a string that " + msg}
		}
		return t, nil
	case json.Number:
		if !textcheck.NumberFits(string(t)) {
			return nil, &Error{Path: loc, Msg: fmt.Sprintf("holds the number %.40s, too large or too long for Postgres's numeric", string(t))}
		}
		return t, nil
	default: // bool, nil
		return t, nil
	}
}

func closeErr(err error, loc string) error {
	if err != nil && !errors.Is(err, io.EOF) {
		return &Error{Path: loc, Msg: "is not valid JSON: " + err.Error()}
	}
	return nil
}

func keyLoc(loc, key string) string {
	if loc == "" {
		return key
	}
	return loc + "." + key
}

func indexLoc(loc string, i int) string { return loc + "[" + strconv.Itoa(i) + "]" }

// kindOf names the kind of a decoded value, for errors.
func kindOf(v any) string {
	switch v.(type) {
	case object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// The nodes of a parsed filter.
type (
	node interface {
		match(doc any) bool
		jsonpath() string
	}
	// all is an object's keys, or $and: every one must match (none: true).
	all []node
	// any is $or: one must match.
	anyOf []node
	// not is $not.
	not struct{ n node }
	// cond is one operator applied to the value at a path.
	cond struct {
		path []string
		op   string // "$eq", "$ne", ...
		arg  any    // plain: map[string]any, []any, json.Number, string, bool, nil
	}
)

// Operators and the operand each takes.
var operators = map[string]string{
	"$eq": "any", "$ne": "any", "$in": "array", "$nin": "array",
	"$gt": "order", "$gte": "order", "$lt": "order", "$lte": "order",
	"$exists": "boolean", "$prefix": "string",
}

// parseFilter reads a filter object found at loc.
func parseFilter(obj object, loc string) (node, error) {
	var out all
	for i, key := range obj.keys {
		val, at := obj.vals[i], keyLoc(loc, key)
		switch {
		case key == "$and" || key == "$or":
			list, err := parseList(val, at)
			if err != nil {
				return nil, err
			}
			if key == "$and" {
				out = append(out, all(list))
			} else {
				out = append(out, anyOf(list))
			}
		case key == "$not":
			sub, ok := val.(object)
			if !ok {
				return nil, &Error{Path: at, Msg: "must be a filter (an object), not " + kindOf(val)}
			}
			n, err := parseFilter(sub, at)
			if err != nil {
				return nil, err
			}
			out = append(out, not{n})
		case strings.HasPrefix(key, "$"):
			msg := "is not a combinator: a filter's keys are paths or $and, $or, $not"
			if _, ok := operators[key]; ok {
				msg = "is an operator: it goes inside a path's object, as {\"path\": {\"" + key + "\": …}}"
			}
			return nil, &Error{Path: at, Msg: msg}
		default:
			conds, err := parsePath(key, val, at)
			if err != nil {
				return nil, err
			}
			out = append(out, conds...)
		}
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

// parseList reads the array of filters of $and or $or.
func parseList(val any, at string) ([]node, error) {
	arr, ok := val.([]any)
	if !ok || len(arr) == 0 {
		return nil, &Error{Path: at, Msg: "must be a non-empty array of filters"}
	}
	list := make([]node, len(arr))
	for j, el := range arr {
		sub, ok := el.(object)
		if !ok {
			return nil, &Error{Path: indexLoc(at, j), Msg: "must be a filter (an object), not " + kindOf(el)}
		}
		n, err := parseFilter(sub, indexLoc(at, j))
		if err != nil {
			return nil, err
		}
		list[j] = n
	}
	return list, nil
}

// parsePath reads a path and its value: a literal, or an object of
// operators (an object with a key beginning with "$").
func parsePath(key string, val any, at string) ([]node, error) {
	path := strings.Split(key, ".")
	if len(path) > MaxDepth {
		return nil, &Error{Path: at, Msg: fmt.Sprintf("has %d segments; a path may have at most %d", len(path), MaxDepth)}
	}
	indexes := 0
	for _, seg := range path {
		switch {
		case seg == "":
			return nil, &Error{Path: at, Msg: "has an empty segment: a path is keys (or array indexes) joined by single dots"}
		case strings.HasPrefix(seg, "$"):
			return nil, &Error{Path: at, Msg: "has a segment beginning with \"$\": only combinators and operators do"}
		case isIndex(seg):
			indexes++
		}
	}
	if indexes > MaxIndexSegments {
		return nil, &Error{Path: at, Msg: fmt.Sprintf("has %d segments of digits; a path may have at most %d", indexes, MaxIndexSegments)}
	}
	ops, ok := val.(object)
	if !ok || !isOperatorObject(ops) {
		return []node{cond{path: path, op: "$eq", arg: plain(val)}}, nil
	}
	var out []node
	for i, op := range ops.keys {
		c, err := parseOperator(path, op, ops.vals[i], keyLoc(at, op))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// isOperatorObject reports whether a path's object value is operators
// rather than a literal: whether any key begins with "$". Equality with an
// object whose keys do takes $eq.
func isOperatorObject(o object) bool {
	for _, k := range o.keys {
		if strings.HasPrefix(k, "$") {
			return true
		}
	}
	return false
}

// parseOperator checks an operator and its operand.
func parseOperator(path []string, op string, arg any, at string) (node, error) {
	kind, ok := operators[op]
	if !ok {
		msg := "is not an operator (use $eq, $ne, $in, $nin, $gt, $gte, $lt, $lte, $exists or $prefix"
		if strings.HasPrefix(op, "$") {
			msg += "; to compare with an object whose keys begin with \"$\", use $eq"
		} else {
			msg += "; an object of operators holds nothing else"
		}
		return nil, &Error{Path: at, Msg: msg + ")"}
	}
	switch kind {
	case "array":
		if _, ok := arg.([]any); !ok {
			return nil, &Error{Path: at, Msg: "takes an array of values, not " + kindOf(arg)}
		}
	case "order":
		switch arg.(type) {
		case json.Number, string:
		default:
			return nil, &Error{Path: at, Msg: "takes a number or a string, not " + kindOf(arg)}
		}
	case "boolean":
		if _, ok := arg.(bool); !ok {
			return nil, &Error{Path: at, Msg: "takes true or false, not " + kindOf(arg)}
		}
	case "string":
		if _, ok := arg.(string); !ok {
			return nil, &Error{Path: at, Msg: "takes a string, not " + kindOf(arg)}
		}
	}
	return cond{path: path, op: op, arg: plain(arg)}, nil
}

// plain turns a decoded literal into the form payloads decode to: objects
// as map[string]any.
func plain(v any) any {
	switch t := v.(type) {
	case object:
		m := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			m[k] = plain(t.vals[i])
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, el := range t {
			out[i] = plain(el)
		}
		return out
	default:
		return v
	}
}

// isIndex reports whether a path segment may name an array element: up to
// maxIndexDigits digits, without a leading zero (but "0").
func isIndex(seg string) bool {
	if seg == "" || len(seg) > maxIndexDigits || (seg[0] == '0' && len(seg) > 1) {
		return false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return false
		}
	}
	return true
}
