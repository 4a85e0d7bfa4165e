package filter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// matchCases are (filter, payload, want) triples: each operator, JSON
// number semantics, missing paths, combinators. TestMatch runs them on the
// reference evaluator and TestJSONPathMatchCases (filter_pg_test.go) on
// Postgres.
var matchCases = []struct {
	name    string
	filter  string
	payload string
	want    bool
}{
	// Literals: equality with JSON semantics.
	{"string equal", `{"tier": "gold"}`, `{"tier": "gold"}`, true},
	{"string differs", `{"tier": "gold"}`, `{"tier": "Gold"}`, false},
	{"nested path", `{"customer.tier": "gold"}`, `{"customer": {"tier": "gold"}}`, true},
	{"nested path missing", `{"customer.tier": "gold"}`, `{"customer": {}}`, false},
	{"path through a scalar", `{"customer.tier": "gold"}`, `{"customer": "gold"}`, false},
	{"1 equals 1.0", `{"n": 1}`, `{"n": 1.0}`, true},
	{"1.0 equals 1", `{"n": 1.0}`, `{"n": 1}`, true},
	{"1 equals 10e-1", `{"n": 1}`, `{"n": 10e-1}`, true},
	{"100 equals 1E2", `{"n": 100}`, `{"n": 1E2}`, true},
	{"-0 equals 0", `{"n": 0}`, `{"n": -0.0}`, true},
	{"number is not its string", `{"n": 1}`, `{"n": "1"}`, false},
	{"string is not its number", `{"n": "1"}`, `{"n": 1}`, false},
	{"big integers exactly", `{"n": 12345678901234567890123}`, `{"n": 12345678901234567890123}`, true},
	{"big integers differ in the last digit", `{"n": 12345678901234567890123}`, `{"n": 12345678901234567890124}`, false},
	{"beyond float64 precision", `{"n": 9007199254740993}`, `{"n": 9007199254740992}`, false},
	{"long fractions", `{"n": 0.1000000000000000000000001}`, `{"n": 0.1}`, false},
	{"huge exponents", `{"n": 1e400}`, `{"n": 10e399}`, true},
	{"true", `{"ok": true}`, `{"ok": true}`, true},
	{"true is not 1", `{"ok": true}`, `{"ok": 1}`, false},
	{"false", `{"ok": false}`, `{"ok": false}`, true},
	{"null equals null", `{"x": null}`, `{"x": null}`, true},
	{"null is not missing", `{"x": null}`, `{}`, false},
	{"null is not false", `{"x": null}`, `{"x": false}`, false},
	{"object whole", `{"a": {"b": 1, "c": [1, 2]}}`, `{"a": {"c": [1.0, 2], "b": 1}}`, true},
	{"object with an extra key", `{"a": {"b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
	{"object with a key less", `{"a": {"b": 1, "c": 2}}`, `{"a": {"b": 1}}`, false},
	{"empty object", `{"a": {}}`, `{"a": {}}`, true},
	{"empty object is not a full one", `{"a": {}}`, `{"a": {"b": 1}}`, false},
	{"array whole", `{"a": [1, "x", null]}`, `{"a": [1, "x", null]}`, true},
	{"array order matters", `{"a": [1, 2]}`, `{"a": [2, 1]}`, false},
	{"array is not unwrapped", `{"a": 1}`, `{"a": [1]}`, false},
	{"array length", `{"a": [1]}`, `{"a": [1, 1]}`, false},
	{"empty array", `{"a": []}`, `{"a": []}`, true},
	{"empty array is not an object", `{"a": []}`, `{"a": {}}`, false},
	{"key with a dollar sign needs $eq", `{"a": {"$eq": {"$ref": "x"}}}`, `{"a": {"$ref": "x"}}`, true},

	// Array indexes and members named by digits.
	{"index", `{"items.0.sku": "A1"}`, `{"items": [{"sku": "A1"}, {"sku": "B2"}]}`, true},
	{"second index", `{"items.1.sku": "B2"}`, `{"items": [{"sku": "A1"}, {"sku": "B2"}]}`, true},
	{"index out of range", `{"items.2.sku": {"$exists": true}}`, `{"items": [{"sku": "A1"}]}`, false},
	{"digits name a member", `{"years.2024": 3}`, `{"years": {"2024": 3}}`, true},
	{"digit member", `{"m.0": "x"}`, `{"m": {"0": "x"}}`, true},
	{"leading zero is no index", `{"a.01": 1}`, `{"a": [0, 1]}`, false},
	{"leading zero names a member", `{"a.01": 1}`, `{"a": {"01": 1}}`, true},
	{"index of a string", `{"s.0": "a"}`, `{"s": "abc"}`, false},
	{"no search through arrays", `{"items.sku": "A1"}`, `{"items": [{"sku": "A1"}]}`, false},
	{"nested indexes", `{"m.1.0": 3}`, `{"m": [[1], [3, 4]]}`, true},

	// Operators.
	{"$eq", `{"a": {"$eq": 2}}`, `{"a": 2.00}`, true},
	{"$eq object", `{"a": {"$eq": {"b": 1}}}`, `{"a": {"b": 1}}`, true},
	{"$ne", `{"a": {"$ne": 2}}`, `{"a": 3}`, true},
	{"$ne equal", `{"a": {"$ne": 2}}`, `{"a": 2}`, false},
	{"$ne other kind", `{"a": {"$ne": 2}}`, `{"a": "2"}`, true},
	{"$in", `{"a": {"$in": [1, "x", null]}}`, `{"a": "x"}`, true},
	{"$in null", `{"a": {"$in": [1, "x", null]}}`, `{"a": null}`, true},
	{"$in none", `{"a": {"$in": [1, "x"]}}`, `{"a": 2}`, false},
	{"$in empty", `{"a": {"$in": []}}`, `{"a": 2}`, false},
	{"$in objects", `{"a": {"$in": [{"b": 1}, [2]]}}`, `{"a": [2]}`, true},
	{"$in does not unwrap", `{"a": {"$in": [1, 2]}}`, `{"a": [1]}`, false},
	{"$nin", `{"a": {"$nin": [1, 2]}}`, `{"a": 3}`, true},
	{"$nin in", `{"a": {"$nin": [1, 2]}}`, `{"a": 2}`, false},
	{"$nin empty", `{"a": {"$nin": []}}`, `{"a": 2}`, true},
	{"$gt", `{"a": {"$gt": 5}}`, `{"a": 6}`, true},
	{"$gt equal", `{"a": {"$gt": 5}}`, `{"a": 5.0}`, false},
	{"$gte equal", `{"a": {"$gte": 5}}`, `{"a": 5.0}`, true},
	{"$lt", `{"a": {"$lt": -1.5}}`, `{"a": -2}`, true},
	{"$lt negative", `{"a": {"$lt": -1.5}}`, `{"a": -1}`, false},
	{"$lte", `{"a": {"$lte": 0}}`, `{"a": -0.0}`, true},
	{"$gt big", `{"a": {"$gt": 1e30}}`, `{"a": 1000000000000000000000000000001}`, true},
	{"$gt tiny", `{"a": {"$gt": 0}}`, `{"a": 1e-300}`, true},
	{"$gt number and string", `{"a": {"$gt": 5}}`, `{"a": "6"}`, false},
	{"$lt string and number", `{"a": {"$lt": "5"}}`, `{"a": 4}`, false},
	{"$gt strings", `{"a": {"$gt": "apple"}}`, `{"a": "banana"}`, true},
	{"$lt strings by code point", `{"a": {"$lt": "a"}}`, `{"a": "Z"}`, true},
	{"$gt unicode", `{"a": {"$gt": "z"}}`, `{"a": "é"}`, true},
	{"$gte strings equal", `{"a": {"$gte": "x"}}`, `{"a": "x"}`, true},
	{"$gt bool", `{"a": {"$gt": 0}}`, `{"a": true}`, false},
	{"$gt null", `{"a": {"$gt": 0}}`, `{"a": null}`, false},
	{"$gt array", `{"a": {"$gt": 0}}`, `{"a": [1]}`, false},
	{"$gt object", `{"a": {"$gt": 0}}`, `{"a": {"b": 1}}`, false},
	{"range", `{"a": {"$gte": 1, "$lt": 10}}`, `{"a": 5}`, true},
	{"range above", `{"a": {"$gte": 1, "$lt": 10}}`, `{"a": 10}`, false},
	{"$exists true", `{"a.b": {"$exists": true}}`, `{"a": {"b": null}}`, true},
	{"$exists true missing", `{"a.b": {"$exists": true}}`, `{"a": {}}`, false},
	{"$exists false", `{"a.b": {"$exists": false}}`, `{"a": {}}`, true},
	{"$exists false present", `{"a.b": {"$exists": false}}`, `{"a": {"b": false}}`, false},
	{"$prefix", `{"sku": {"$prefix": "BK-"}}`, `{"sku": "BK-123"}`, true},
	{"$prefix no", `{"sku": {"$prefix": "BK-"}}`, `{"sku": "bk-123"}`, false},
	{"$prefix empty", `{"sku": {"$prefix": ""}}`, `{"sku": "x"}`, true},
	{"$prefix number", `{"sku": {"$prefix": "1"}}`, `{"sku": 12}`, false},
	{"$prefix quotes and backslashes", `{"s": {"$prefix": "a\"b\\c"}}`, `{"s": "a\"b\\cd"}`, true},
	{"escaped control characters", `{"s": "a\nb\u0001"}`, `{"s": "a\nb\u0001"}`, true},
	{"key with a quote", `{"we\"ird.ke\\y": 1}`, `{"we\"ird": {"ke\\y": 1}}`, true},

	// A missing path matches $ne, $nin and $exists: false, and nothing else.
	{"missing $eq", `{"a": {"$eq": null}}`, `{}`, false},
	{"missing $ne", `{"a": {"$ne": 1}}`, `{}`, true},
	{"missing $in", `{"a": {"$in": [null]}}`, `{}`, false},
	{"missing $nin", `{"a": {"$nin": [1]}}`, `{}`, true},
	{"missing $gt", `{"a": {"$gt": 1}}`, `{}`, false},
	{"missing $lte", `{"a": {"$lte": "z"}}`, `{}`, false},
	{"missing $prefix", `{"a": {"$prefix": ""}}`, `{}`, false},
	{"missing under an array", `{"a.b": {"$ne": 1}}`, `{"a": [{"b": 1}]}`, true},
	{"missing $not of $eq", `{"$not": {"a": 1}}`, `{}`, true},

	// Combinators and several keys.
	{"two keys", `{"a": 1, "b": 2}`, `{"a": 1, "b": 2}`, true},
	{"two keys one fails", `{"a": 1, "b": 2}`, `{"a": 1, "b": 3}`, false},
	{"$and", `{"$and": [{"a": 1}, {"b": {"$gt": 1}}]}`, `{"a": 1, "b": 2}`, true},
	{"$and fails", `{"$and": [{"a": 1}, {"b": {"$gt": 1}}]}`, `{"a": 1, "b": 0}`, false},
	{"$or", `{"$or": [{"a": 1}, {"b": 1}]}`, `{"b": 1}`, true},
	{"$or none", `{"$or": [{"a": 1}, {"b": 1}]}`, `{"c": 1}`, false},
	{"$not", `{"$not": {"a": {"$gt": 1}}}`, `{"a": 1}`, true},
	{"$not of a kind mismatch", `{"$not": {"a": {"$gt": 1}}}`, `{"a": "2"}`, true},
	{"$not $not", `{"$not": {"$not": {"a": 1}}}`, `{"a": 1}`, true},
	{"nested", `{"$or": [{"$and": [{"a": 1}, {"$not": {"b": 2}}]}, {"c": {"$in": [3]}}]}`, `{"a": 1, "b": 3}`, true},
	{"nested no", `{"$or": [{"$and": [{"a": 1}, {"$not": {"b": 2}}]}, {"c": {"$in": [3]}}]}`, `{"a": 1, "b": 2}`, false},
	{"path beside combinator", `{"a": 1, "$or": [{"b": 1}, {"c": 1}]}`, `{"a": 1, "c": 1}`, true},
	{"empty filter", `{}`, `{"a": 1}`, true},
	{"empty filter in $and", `{"$and": [{}]}`, `{}`, true},
	{"$not of the empty filter", `{"$not": {}}`, `{}`, false},
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range matchCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := Parse([]byte(tc.filter))
			require.NoError(t, err)
			got, err := f.Match([]byte(tc.payload))
			require.NoError(t, err)
			require.Equal(t, tc.want, got, "filter %s on %s", tc.filter, tc.payload)
		})
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a": `, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	deepOK := strings.Repeat(`{"a": `, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	_, err := Parse([]byte(deepOK))
	require.NoError(t, err, "%d levels are allowed", MaxDepth)
	big := `{"a": {"$in": [` + strings.Repeat(`"xxxxxxx",`, MaxBytes/10) + `"x"]}}`
	for _, tc := range []struct {
		name, filter, path, msg string
	}{
		{"not an object", `[1]`, "", "must be a JSON object, not an array"},
		{"null", `null`, "", "must be a JSON object, not null"},
		{"too large", big, "", "a filter may be at most 4096"},
		{"too deep", deep, strings.TrimSuffix(strings.Repeat("a.", MaxDepth), "."), "nests deeper than 32 levels"},
		{"unknown combinator", `{"$nor": [{"a": 1}]}`, "$nor", "is not a combinator"},
		{"operator at the top", `{"$gt": 1}`, "$gt", "is an operator"},
		{"unknown operator", `{"a": {"$regex": "x"}}`, "a.$regex", "is not an operator"},
		{"operators mixed with keys", `{"a": {"$gt": 1, "b": 2}}`, "a.b", "an object of operators holds nothing else"},
		{"$and not an array", `{"$and": {"a": 1}}`, "$and", "non-empty array of filters"},
		{"$and empty", `{"$and": []}`, "$and", "non-empty array of filters"},
		{"$or element not an object", `{"$or": [{"a": 1}, 2]}`, "$or[1]", "must be a filter (an object), not a number"},
		{"$not not an object", `{"$not": [1]}`, "$not", "must be a filter (an object), not an array"},
		{"nested bad path", `{"$or": [{"$and": [{"a..b": 1}]}]}`, "$or[0].$and[0].a..b", "has an empty segment"},
		{"empty path", `{"": 1}`, "", "has an empty segment"},
		{"trailing dot", `{"a.": 1}`, "a.", "has an empty segment"},
		{"dollar segment", `{"a.$b": 1}`, "a.$b", "segment beginning with \"$\""},
		{"too many segments", `{"` + strings.TrimSuffix(strings.Repeat("a.", MaxDepth+1), ".") + `": 1}`, strings.TrimSuffix(strings.Repeat("a.", MaxDepth+1), "."), "at most 32"},
		{"too many index segments", `{"a.0.1.2.3.4": 1}`, "a.0.1.2.3.4", "at most 4"},
		{"$in not an array", `{"a": {"$in": 1}}`, "a.$in", "takes an array of values, not a number"},
		{"$nin not an array", `{"a": {"$nin": {"b": 1}}}`, "a.$nin", "takes an array of values, not an object"},
		{"$gt of a boolean", `{"a": {"$gt": true}}`, "a.$gt", "takes a number or a string, not a boolean"},
		{"$lte of an array", `{"a": {"$lte": [1]}}`, "a.$lte", "takes a number or a string, not an array"},
		{"$exists of a string", `{"a": {"$exists": "yes"}}`, "a.$exists", "takes true or false, not a string"},
		{"$prefix of a number", `{"a": {"$prefix": 1}}`, "a.$prefix", "takes a string, not a number"},
		{"duplicate key", `{"a": 1, "a": 2}`, "a", "appears twice"},
		{"duplicate key in a literal", `{"a": {"b": 1, "b": 1}}`, "a.b", "appears twice"},
		{"NUL", `{"a": "x\u0000"}`, "a", "NUL"},
		{"number too large", `{"a": 1e200000}`, "a", "too large or too long"},
		{"number too long", `{"a": {"$in": [1e-20000]}}`, "a.$in[0]", "too large or too long"},
		{"not JSON", `{"a": }`, "", "is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.filter))
			var fe *Error
			require.True(t, errors.As(err, &fe), "want a filter.Error, got %v", err)
			require.Equal(t, tc.path, fe.Path)
			require.Contains(t, fe.Msg, tc.msg)
		})
	}
}

func TestParseKeepsText(t *testing.T) {
	t.Parallel()
	f, err := Parse([]byte("{\n  \"b\": 1,\n  \"a\": {\"$in\": [1.0, 2]}\n}"))
	require.NoError(t, err)
	require.JSONEq(t, `{"b": 1, "a": {"$in": [1.0, 2]}}`, f.String())
	require.Equal(t, `{"b":1,"a":{"$in":[1.0,2]}}`, f.String(), "kept as written, without the whitespace")
}

func TestDecimals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1", "1.0", 0}, {"0", "-0", 0}, {"0.0e10", "0", 0}, {"10e-1", "1", 0}, {"1e2", "100", 0},
		{"1", "2", -1}, {"-1", "-2", 1}, {"-1", "1", -1}, {"0.1", "0.10000000000000000001", -1},
		{"99", "100", -1}, {"1e400", "1e399", 1}, {"-1e400", "-1e399", -1}, {"0.001", "0.01", -1},
		{"12345678901234567890", "12345678901234567891", -1}, {"5", "0.5e1", 0},
	} {
		got := compareDecimals(parseDecimal(json.Number(tc.a)), parseDecimal(json.Number(tc.b)))
		require.Equal(t, tc.want, got, "%s vs %s", tc.a, tc.b)
		require.Equal(t, -tc.want, compareDecimals(parseDecimal(json.Number(tc.b)), parseDecimal(json.Number(tc.a))), "%s vs %s", tc.b, tc.a)
	}
}
