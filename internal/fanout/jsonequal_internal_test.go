package fanout

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSONEqual(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{`{"a":1,"b":[true,null,"x"]}`, "{ \"b\" : [ true , null , \"x\" ] ,\n\t\"a\" : 1 }"},
		{`{"total":4200}`, `{"total":4200.0}`},
		{`{"total":4200}`, `{"total":4.2e3}`},
		{`{"total":4200}`, `{"total":42E+2}`},
		{`{"total":4200}`, `{"total":420000e-2}`},
		{`0.05`, `5e-2`},
		{`0`, `-0.0e7`},
		{`-12.50`, `-1.25e1`},
		{`"é"`, `"\u00e9"`},
		{`{"a":{"y":2,"x":1}}`, `{"a":{"x":1,"y":2}}`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // the last member counts, as encoding/json reads it
	}
	for _, c := range same {
		require.True(t, jsonEqual([]byte(c[0]), []byte(c[1])), "%s = %s", c[0], c[1])
		require.True(t, jsonEqual([]byte(c[1]), []byte(c[0])), "%s = %s", c[1], c[0])
	}
	differ := [][2]string{
		{`{"total":4200}`, `{"total":4201}`},
		{`{"total":4200}`, `{"total":"4200"}`},
		{`{"total":4200}`, `{"total":4.2e2}`},
		{`9007199254740993`, `9007199254740992`}, // equal as float64, not as numbers
		{`0.1`, `1`},
		{`-1`, `1`},
		{`[1,2]`, `[2,1]`},
		{`[1,2]`, `[1,2,3]`},
		{`{"a":1}`, `{"a":1,"b":1}`},
		{`{"a":null}`, `{}`},
		{`{"a":1}`, `{"A":1}`},
		{`{"a":1}`, `{"a":1} {}`},
		{`{"a":1}`, `{"a":1`},
		{`1e9223372036854775807`, `10e9223372036854775806`}, // exponents past what is compared
	}
	for _, c := range differ {
		require.False(t, jsonEqual([]byte(c[0]), []byte(c[1])), "%s ≠ %s", c[0], c[1])
		require.False(t, jsonEqual([]byte(c[1]), []byte(c[0])), "%s ≠ %s", c[1], c[0])
	}
}

// TestJSONEqualSameBytesAllocatesNothing: a replay with the very bytes of
// the first post costs no decoding. Not parallel: AllocsPerRun counts
// every goroutine's allocations.
func TestJSONEqualSameBytesAllocatesNothing(t *testing.T) {
	a, b := []byte(`{"order_id":1042,"total":4200}`), []byte(`{"order_id":1042,"total":4200}`)
	require.Zero(t, testing.AllocsPerRun(100, func() { jsonEqual(a, b) }))
}
