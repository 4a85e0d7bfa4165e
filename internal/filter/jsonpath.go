package filter

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The compiled form: a jsonpath predicate in strict mode, so that arrays
// are never unwrapped and a missing member is an error rather than an
// empty result. Strict mode turns errors into unknown, and so does
// comparing values of different kinds, so every predicate built here is
// made total (true or false, never unknown) before it is combined:
//
//   - A path is walked with guards: `$ ? (exists(@."a"))."a"` yields the
//     member or nothing — exists() of a missing member is unknown, which a
//     filter drops — so `exists(walk ? (cond))` is false, not unknown, when
//     the path is missing.
//   - Every condition on the value checks its kind first (`@.type() ==
//     "number" && @ > 5`): && stops at false, before the comparison that
//     would be unknown.
//   - Objects and arrays do not compare in jsonpath, so equality with one
//     is spelt out: the kind, the size or the set of keys, and each member.
//
// Then $ne, $nin and $exists: false are the negation of their positive
// form, and !, && and || over total predicates behave as in Match.

const (
	alwaysTrue  = "exists($)"
	alwaysFalse = "!(exists($))"
)

func (n all) jsonpath() string {
	switch len(n) {
	case 0:
		return alwaysTrue
	case 1:
		return n[0].jsonpath()
	}
	parts := make([]string, len(n))
	for i, sub := range n {
		parts[i] = sub.jsonpath()
	}
	return "(" + strings.Join(parts, " && ") + ")"
}

func (n anyOf) jsonpath() string {
	if len(n) == 1 {
		return n[0].jsonpath()
	}
	parts := make([]string, len(n))
	for i, sub := range n {
		parts[i] = sub.jsonpath()
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

func (n not) jsonpath() string { return "!(" + n.n.jsonpath() + ")" }

func (c cond) jsonpath() string {
	switch c.op {
	case "$exists":
		p := at("$", c.path, "")
		if c.arg.(bool) {
			return p
		}
		return "!(" + p + ")"
	case "$eq":
		return at("$", c.path, eqCond(c.arg))
	case "$ne":
		return "!(" + at("$", c.path, eqCond(c.arg)) + ")"
	case "$in":
		return at("$", c.path, inCond(c.arg.([]any)))
	case "$nin":
		return "!(" + at("$", c.path, inCond(c.arg.([]any))) + ")"
	case "$prefix":
		return at("$", c.path, `(@.type() == "string" && @ starts with `+quote(c.arg.(string))+")")
	}
	ops := map[string]string{"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
	kind, lit := "string", ""
	switch a := c.arg.(type) {
	case json.Number:
		kind, lit = "number", parseDecimal(a).jsonpath()
	case string:
		lit = quote(a)
	}
	return at("$", c.path, fmt.Sprintf(`(@.type() == "%s" && @ %s %s)`, kind, ops[c.op], lit))
}

// at is the predicate "the value at path, from base ($, or @ inside a
// filter), exists and satisfies cond" (a predicate on @; "" for none).
// A segment that may be an index is either a member or an element,
// depending on what the value holding it is: both are tried, and at most
// one can exist.
func at(base string, path []string, cond string) string {
	walk := base
	for i, seg := range path {
		if isIndex(seg) {
			rest := at("@", path[i+1:], cond)
			member := walk + " ? (exists(@." + quote(seg) + "))." + quote(seg) + " ? (" + rest + ")"
			element := walk + " ? (exists(@[" + seg + "]))[" + seg + "] ? (" + rest + ")"
			return "(exists(" + member + ") || exists(" + element + "))"
		}
		walk += " ? (exists(@." + quote(seg) + "))." + quote(seg)
	}
	if cond == "" {
		return "exists(" + walk + ")"
	}
	return "exists(" + walk + " ? (" + cond + "))"
}

// eqCond is the predicate "@ equals v", for any JSON value v.
func eqCond(v any) string {
	switch t := v.(type) {
	case nil:
		return `@.type() == "null"`
	case bool:
		return `(@.type() == "boolean" && @ == ` + strconv.FormatBool(t) + ")"
	case json.Number:
		return `(@.type() == "number" && @ == ` + parseDecimal(t).jsonpath() + ")"
	case string:
		return `(@.type() == "string" && @ == ` + quote(t) + ")"
	case []any:
		parts := []string{`@.type() == "array"`, "@.size() == " + strconv.Itoa(len(t))}
		for i, el := range t {
			parts = append(parts, "exists(@["+strconv.Itoa(i)+"] ? ("+eqCond(el)+"))")
		}
		return "(" + strings.Join(parts, " && ") + ")"
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := []string{`@.type() == "object"`}
		if len(keys) == 0 {
			parts = append(parts, "!(exists(@.keyvalue()))")
		} else {
			others := make([]string, len(keys))
			for i, k := range keys {
				others[i] = "@.key != " + quote(k)
			}
			parts = append(parts, "!(exists(@.keyvalue() ? ("+strings.Join(others, " && ")+")))")
		}
		for _, k := range keys {
			parts = append(parts, at("@", []string{k}, eqCond(t[k])))
		}
		return "(" + strings.Join(parts, " && ") + ")"
	default:
		panic(fmt.Sprintf("filter: literal of type %T", v))
	}
}

// inCond is the predicate "@ equals one of list".
func inCond(list []any) string {
	if len(list) == 0 {
		return alwaysFalse
	}
	parts := make([]string, len(list))
	for i, el := range list {
		parts[i] = eqCond(el)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// quote writes s as a jsonpath string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
