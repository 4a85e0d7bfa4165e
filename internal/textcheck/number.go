package textcheck

import "strconv"

// Postgres's jsonb keeps a JSON number as a numeric, which holds at most
// numericMaxIntDigits digits before the decimal point and
// numericMaxScale after it (the digits written after the point, less the
// exponent). A payload is stored as json, which keeps its text, but
// routing reads it as jsonb to match subscription filters, so a number
// jsonb cannot hold would fail the statement storing a whole group of
// events. The limits are far beyond any real payload.
const (
	numericMaxIntDigits = 131072
	numericMaxScale     = 16383
)

// NumberFits reports whether the JSON number text s (the syntax is not
// checked here) fits a Postgres numeric. TestNumberFits holds the limits.
func NumberFits(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[start:i]
	}
	exp := int64(0)
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil {
			return false // beyond any limit
		}
		exp = e
	}
	if scale := int64(len(frac)) - exp; scale > numericMaxScale {
		return false
	}
	// The value's digits before the point: from its first non-zero digit
	// to the point, moved by the exponent.
	digits := intPart + frac
	first := 0
	for first < len(digits) && digits[first] == '0' {
		first++
	}
	if first == len(digits) {
		return true // zero
	}
	return int64(len(intPart)-first)+exp <= numericMaxIntDigits
}

// LargeNumber returns the offset of the first number in the JSON document
// b that does not fit a Postgres numeric (NumberFits), or -1. The syntax
// of b is not checked: strings are skipped, and every other run of
// number characters is taken as a number.
func LargeNumber(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '-' || isDigit(c):
			start := i
			for i < len(b) && isNumberByte(b[i]) {
				i++
			}
			// Short numbers always fit: skip the check for them.
			if i-start > 16 || hasExponent(b[start:i]) {
				if !NumberFits(string(b[start:i])) {
					return start
				}
			}
			i--
		}
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isNumberByte(c byte) bool {
	return isDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func hasExponent(b []byte) bool {
	for _, c := range b {
		if c == 'e' || c == 'E' {
			return true
		}
	}
	return false
}
