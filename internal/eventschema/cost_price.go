package eventschema

import (
	"strconv"
	"strings"
)

// Pricing a payload: walking it along the automaton before validating.

// count writes n for a message; a saturated count is "more than 10^18".
func count(n uint64) string {
	if n >= infinite {
		return "more than 10^18"
	}
	return strconv.FormatUint(n, 10)
}

// price is what validating v costs: evaluations, with an enum's values and
// an object's members counted one each, uniqueItems counting every node
// below the array, and the text keywords (pattern, format, content,
// patternProperties) counting stepsPerUnit steps per unit over every byte
// they read. It stops counting once past limit.
func (m *model) price(v any, limit uint64) uint64 {
	return m.walk(m.root, m.scale, v, limit)
}

func (m *model) walk(st *state, scale uint64, v any, limit uint64) uint64 {
	c := mul(scale, st.base)
	switch v := v.(type) {
	case string:
		c = add(c, textUnits(mul(scale, st.perByte), len(v)))
	case map[string]any:
		c = add(c, mul(mul(scale, st.perKey), uint64(len(v))))
		for name, child := range v {
			if c > limit {
				return c
			}
			c = add(c, textUnits(mul(scale, st.keyByte), len(name)))
			c = add(c, m.descend(st, st.keyLabel(name), scale, child, limit-c))
		}
	case []any:
		if st.unique > 0 {
			c = add(c, mul(mul(scale, st.unique), nodes(v)))
		}
		for i, child := range v {
			if c > limit {
				return c
			}
			c = add(c, m.descend(st, st.indexLabel(i), scale, child, limit-c))
		}
	}
	return c
}

func (m *model) descend(st *state, l label, scale uint64, child any, limit uint64) uint64 {
	s, err := m.step(st, l)
	switch {
	case err != nil:
		return infinite // cannot happen once frozen: the work bound is Compile's
	case s.to == nil:
		return 0
	}
	return m.walk(s.to, mul(scale, s.scale), child, limit)
}

// nodes counts the values in v, v included.
func nodes(v any) uint64 {
	n := uint64(1)
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			n += nodes(c)
		}
	case []any:
		for _, c := range v {
			n += nodes(c)
		}
	}
	return n
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
