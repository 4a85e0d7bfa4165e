package control

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func fieldsOf(err error) map[string]string {
	out := map[string]string{}
	var v *sluice.ValidationError
	if errors.As(err, &v) {
		for _, f := range v.Fields {
			out[f.Field] = f.Message
		}
	}
	return out
}

func TestConsumerSettings(t *testing.T) {
	t.Parallel()
	addr := "Ops <ops@initech.test>"
	_, err := consumerSettings("Initech", &addr)
	require.Contains(t, fieldsOf(err), "alert_email", "a display name is not one address")
	addr = "ops@initech.test"
	set, err := consumerSettings("Initech", &addr)
	require.NoError(t, err)
	require.Equal(t, "ops@initech.test", *set.AlertEmail)
	set, err = consumerSettings("", nil)
	require.NoError(t, err)
	require.Nil(t, set.AlertEmail)
}

// TestEventType: text that is not JSON says where it breaks; an example
// must be an object satisfying the schema; a schema must compile.
func TestCheckEventType(t *testing.T) {
	t.Parallel()
	et := func(example, schema string) sluice.EventType {
		out := sluice.EventType{Name: "invoice.paid"}
		if example != "" {
			out.Example = json.RawMessage(example)
		}
		if schema != "" {
			out.Schema = json.RawMessage(schema)
		}
		return out
	}
	require.Equal(t, "is not JSON: invalid character ',' looking for beginning of object key string (at byte 2)",
		fieldsOf(checkEventType(et(`{,}`, "")))["example"])
	require.Equal(t, "must be a JSON object, not an array", fieldsOf(checkEventType(et(`[]`, "")))["example"])
	require.Contains(t, fieldsOf(checkEventType(et("", `{"type": 12}`))), "schema")
	require.Contains(t, fieldsOf(checkEventType(et(`{"a": 1}`, `{"required": ["b"]}`))), "example")
	require.NoError(t, checkEventType(et(`{"b": 1}`, `{"required": ["b"]}`)))

	v := &sluice.ValidationError{}
	checkEventTypeName("sluice.mine", v)
	checkEventTypeName("ok.name", v)
	require.Len(t, v.Fields, 1)
	require.Contains(t, v.Fields[0].Message, "Sluice's own")
}
