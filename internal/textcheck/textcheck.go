// Package textcheck is Sluice's one check of text arriving from outside —
// JSON bodies, query parameters, form values, headers, path segments —
// before any of it can reach Postgres. Postgres text holds only valid UTF-8
// and no NUL character, and its json type refuses unpaired UTF-16
// surrogate escapes; this package finds such text first, so that the API
// and the dashboard refuse it with a 4xx naming where it was, instead of
// failing in the database with a 500 (or, worse, failing a whole batch of
// other requests' events committed with it).
//
// The package is a leaf: it knows nothing of HTTP answers. Its callers turn
// what it reports into their own 400 and 422 answers.
package textcheck

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Messages, phrased to follow the name of what is wrong.
const (
	MsgInvalidUTF8 = "is not valid UTF-8"
	MsgNUL         = "must not contain NUL characters"
)

// String returns why s cannot be stored as text ("" when it can): it is not
// valid UTF-8, or it holds a NUL character.
func String(s string) string {
	switch {
	case !utf8.ValidString(s):
		return MsgInvalidUTF8
	case strings.IndexByte(s, 0) >= 0:
		return MsgNUL
	default:
		return ""
	}
}

// Values checks every name and value of a query string or form. It returns
// the first offending parameter's name (made printable) and why, or "", ""
// when all are fine. Names are visited in sorted order, so the answer is
// stable.
func Values(vs url.Values) (name, msg string) {
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if m := String(n); m != "" {
			return Printable(n), "name " + m
		}
		for _, v := range vs[n] {
			if m := String(v); m != "" {
				return n, m
			}
		}
	}
	return "", ""
}

// Printable returns s quoted as Go would (invalid UTF-8 and control
// characters escaped), without the surrounding quotes: safe to echo in a
// message.
func Printable(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
