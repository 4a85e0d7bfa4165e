package textcheck

import (
	"fmt"
	"unicode/utf8"
)

// JSON checks the text of a JSON document before it is decoded: JSON is
// UTF-8 (RFC 8259), so invalid UTF-8 anywhere is refused rather than
// silently replaced with U+FFFD by a decoder; and a \u escape of a UTF-16
// surrogate must be half of a pair, since a lone one names no character
// (Go would decode it to U+FFFD, Postgres refuses it). It returns "" when
// the text is fine, else what is wrong and where. It does not check the
// syntax otherwise: that is the decoder's job.
func JSON(b []byte) string {
	if !utf8.Valid(b) {
		return fmt.Sprintf("the body is not valid UTF-8 (at byte %d); JSON must be UTF-8", invalidAt(b))
	}
	if at := loneSurrogate(b); at >= 0 {
		return fmt.Sprintf("the \\u escape at byte %d is an unpaired UTF-16 surrogate, which names no character", at)
	}
	return ""
}

// invalidAt is the offset of the first byte of b that is not valid UTF-8.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// loneSurrogate returns the offset of the first \u escape of a surrogate
// that is not a high one followed at once by an escaped low one, or -1.
func loneSurrogate(b []byte) int { return findEscape(b, false) }

// EscapedNUL reports whether a JSON document holds a \u0000 escape: a NUL
// character once decoded. Decoded string fields are checked by Fields; a
// payload kept as raw JSON is checked with this.
func EscapedNUL(b []byte) bool { return findEscape(b, true) >= 0 }

// findEscape returns the offset of the first \u0000 escape (nul) or lone
// surrogate escape (!nul), or -1. Backslashes are only valid inside
// strings, so every one starts an escape; one outside a string is a syntax
// error the decoder reports.
func findEscape(b []byte, nul bool) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := escapedRune(b, i)
		switch {
		case !ok:
			i++ // \" \\ \n ...: skip the escaped byte
		case nul && r == 0:
			return i
		case !nul && r >= 0xDC00 && r <= 0xDFFF:
			return i
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := escapedRune(b, i+6)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				if !nul {
					return i
				}
				i += 5
				continue
			}
			i += 11
		default:
			i += 5
		}
	}
	return -1
}

// escapedRune reads a \uXXXX escape at b[i:].
func escapedRune(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[i+2 : i+6] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// Depth is the deepest nesting of arrays and objects in a JSON document
// (0 for a scalar), read without decoding it.
func Depth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}
