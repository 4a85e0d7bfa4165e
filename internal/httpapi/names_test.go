package httpapi

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckNames(t *testing.T) {
	t.Parallel()
	batch := reflect.TypeFor[batchInput]()
	for body, want := range map[string]string{
		`{"events":[{"type":"a","payload":{}}]}`:                                   "",
		`{"events":[{"type":"a"},{"type":"b","payload":{"a":[1,{"x":1,"x":2}]}}]}`: "events[1].payload.a[1].x is given twice",
		`{"events":[{"type":"a","Type":"b"}]}`:                                     `events[0].Type: is not a known field; names are case-sensitive: did you mean "type"?`,
		`{"events":[{"type":"a","payload":{"Type":1,"type":2}}]}`:                  "",
		`{"events":[{"payload":{"a\"b":1,"a\u0022b":2}}]}`:                         `events[0].payload.a"b is given twice`,
		`{"events":[{"payload":{"s":"{\"k\":1,\"k\":2}"}}]}`:                       "",
		`{"events":[{"payload":{"s":"\\","t":"\\\"","s":0}}]}`:                     "events[0].payload.s is given twice",
	} {
		err := checkNames([]byte(body), batch, "")
		if want == "" {
			require.NoError(t, err, body)
			continue
		}
		require.ErrorContains(t, err, want, body)
	}

	// Past the names a slice holds, a map takes over.
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf(`"k%d":%d`, i, i))
	}
	body := `{"type":"a","payload":{` + strings.Join(many, ",") + `}}`
	require.NoError(t, checkNames([]byte(body), reflect.TypeFor[eventInput](), ""))
	body = `{"type":"a","payload":{` + strings.Join(many, ",") + `,"k3":0}}`
	require.ErrorContains(t, checkNames([]byte(body), reflect.TypeFor[eventInput](), ""), "payload.k3 is given twice")
}
