package filter

import (
	"encoding/json"
	"strconv"
	"strings"
)

// decimal is a JSON number exactly: sign × digits × 10^exp, with digits
// free of leading and trailing zeros ("" for zero), so that two numbers
// are equal when their decimals are, whatever their text ("1", "1.0",
// "10e-1"), and compare without rounding, however big or long.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// parseDecimal reads JSON number text (its syntax already checked by the
// decoder).
func parseDecimal(n json.Number) decimal {
	s := string(n)
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expText, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil {
			// Beyond int64: no payload Postgres holds gets here; keep the
			// order right anyway.
			e = 1 << 40
			if strings.HasPrefix(expText, "-") {
				e = -e
			}
		}
		d.exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	d.exp -= int64(len(frac))
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	d.exp += int64(len(digits) - len(trimmed))
	d.digits = trimmed
	if d.digits == "" {
		d.neg, d.exp = false, 0
	}
	return d
}

// compareDecimals returns -1, 0 or 1 as a is less than, equal to or
// greater than b.
func compareDecimals(a, b decimal) int {
	sa, sb := a.sign(), b.sign()
	switch {
	case sa != sb:
		return cmpInt(int64(sa), int64(sb))
	case sa == 0:
		return 0
	}
	c := compareMagnitudes(a, b)
	if sa < 0 {
		return -c
	}
	return c
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	default:
		return 1
	}
}

// compareMagnitudes compares |a| and |b|, both non-zero: first by the
// position of their leading digit, then digit by digit (a missing digit is
// a zero, and no trailing zeros are kept, so a shorter run that is a
// prefix of the longer is the smaller).
func compareMagnitudes(a, b decimal) int {
	if c := cmpInt(int64(len(a.digits))+a.exp, int64(len(b.digits))+b.exp); c != 0 {
		return c
	}
	return strings.Compare(a.digits, b.digits)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	default:
		return 0
	}
}

// jsonpath writes d as a jsonpath numeric literal: digits, then an
// exponent when there is one, with a unary minus for a negative number.
func (d decimal) jsonpath() string {
	if d.digits == "" {
		return "0"
	}
	s := d.digits
	if d.exp != 0 {
		s += "e" + strconv.FormatInt(d.exp, 10)
	}
	if d.neg {
		s = "-" + s
	}
	return s
}
