package fanout

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// jsonEqual reports whether a and b are the same JSON value: equal once
// whitespace, the order of object members, string escapes ("\u00e9" or
// "é") and the spelling of numbers (4200, 4200.0, 4.2e3) are set aside.
// A number is compared by its exact decimal value, never through a
// float64, so 9007199254740993 differs from 9007199254740992. An object
// that names a member twice is read as encoding/json reads it: the last
// one counts. Either document failing to parse is not equal.
//
// Identical bytes answer at once; anything else is decoded, which costs
// allocations, but only a repeated Idempotency-Key whose body differs
// byte for byte from the first ever gets here.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, ok := decodeJSON(a)
	if !ok {
		return false
	}
	vb, ok := decodeJSON(b)
	if !ok {
		return false
	}
	return sameValue(va, vb)
}

// decodeJSON decodes one JSON document, its numbers as json.Number.
func decodeJSON(data []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := d.Token(); err == nil {
		return nil, false // a second value after the first
	}
	return v, true
}

// sameValue compares two values decoded by decodeJSON.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !sameValue(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(b))
	default: // string, bool, nil
		return a == b
	}
}

// sameNumber reports whether two JSON number literals have the same
// decimal value.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	da, oka := decimalOf(a)
	db, okb := decimalOf(b)
	if !oka || !okb {
		return false // an exponent past int64: only the same spelling is equal
	}
	return da == db
}

// decimal is a number as ±0.digits × 10^exp, digits without leading or
// trailing zeros; zero is the zero decimal, whatever its sign.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// decimalOf reads a JSON number literal (already checked by the decoder).
func decimalOf(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	var exp int64
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e > 1<<62 || e < -1<<62 {
			return decimal{}, false
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := intPart + frac
	exp += int64(len(intPart))
	trimmed := strings.TrimLeft(digits, "0")
	exp -= int64(len(digits) - len(trimmed))
	trimmed = strings.TrimRight(trimmed, "0")
	if trimmed == "" {
		return decimal{}, true
	}
	d.digits, d.exp = trimmed, exp
	return d, true
}
