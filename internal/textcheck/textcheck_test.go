package textcheck_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/textcheck"
)

func TestString(t *testing.T) {
	t.Parallel()
	require.Empty(t, textcheck.String("héllo 💥"))
	require.Equal(t, textcheck.MsgInvalidUTF8, textcheck.String("a\xffb"))
	require.Equal(t, textcheck.MsgNUL, textcheck.String("a\x00b"))
}

func TestValues(t *testing.T) {
	t.Parallel()
	name, msg := textcheck.Values(url.Values{"a": {"ok"}, "type": {"ok", "\xff"}})
	require.Equal(t, "type", name)
	require.Equal(t, textcheck.MsgInvalidUTF8, msg)
	name, msg = textcheck.Values(url.Values{"a\x00": {"ok"}})
	require.Equal(t, `a\x00`, name)
	require.Equal(t, "name "+textcheck.MsgNUL, msg)
	name, msg = textcheck.Values(url.Values{"a": {"ok"}})
	require.Empty(t, name+msg)
}

func TestEscapedNUL(t *testing.T) {
	t.Parallel()
	require.True(t, textcheck.EscapedNUL([]byte(`{"a":"x\u0000y"}`)))
	require.True(t, textcheck.EscapedNUL([]byte(`{"a":"\ud800","b":"\u0000"}`)), "after a lone surrogate")
	require.False(t, textcheck.EscapedNUL([]byte(`{"a":"\\u0000","b":"\u0001\ud83d\ude00"}`)), "an escaped backslash, other escapes")
}

func TestJSON(t *testing.T) {
	t.Parallel()
	for doc, ok := range map[string]bool{
		`{"a":"\u0000","b":"\ud83d\ude00","c":"\\ud800"}`: true,
		`{"a":"\"\\"}`:         true,
		"{\"a\":\"\xff\"}":     false,
		`{"a":"\ud800"}`:       false,
		`{"a":"\ud800\u0041"}`: false,
		`{"a":"\udc00"}`:       false,
		`{"a":"\ud800`:         false,
	} {
		require.Equal(t, ok, textcheck.JSON([]byte(doc)) == "", doc)
	}
}

func TestDepth(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, textcheck.Depth([]byte(`"[[["`)))
	require.Equal(t, 1, textcheck.Depth([]byte(`{"a":"\"[{"}`)))
	require.Equal(t, 3, textcheck.Depth([]byte(`{"a":[{}],"b":[[1]]}`)))
}

func TestFields(t *testing.T) {
	t.Parallel()
	type item struct {
		Key *string `json:"coalesce_key"`
	}
	in := struct {
		Name    string            `json:"name"`
		Items   []item            `json:"events"`
		Headers map[string]string `json:"headers"`
		Raw     json.RawMessage   `json:"payload"`
		Skipped string            `json:"-"`
	}{
		Name:    "ok",
		Items:   []item{{}, {Key: new(string)}, {Key: func() *string { s := "k\x00"; return &s }()}},
		Headers: map[string]string{"X-A": "a\x00", "B\x00": "ok"},
		Raw:     json.RawMessage(`"\u0000"`),
		Skipped: "\x00",
	}
	var got []string
	textcheck.Fields(&in, func(path, msg string) { got = append(got, path+": "+msg) })
	require.Equal(t, []string{
		"events[2].coalesce_key: " + textcheck.MsgNUL,
		`headers.B\x00: name ` + textcheck.MsgNUL,
		"headers.X-A: " + textcheck.MsgNUL,
	}, got)
}
