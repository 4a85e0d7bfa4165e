package eventschema

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// chain is the probe's schema: levels $defs, each an applicator (allOf,
// anyOf or oneOf) of two $refs to the level below, ending in leaf. Level 0
// is reached by one path, the leaf by 2^levels.
func chain(levels int, applicator, leaf string) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"d%d":{"%s":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, applicator, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":%s}}`, levels, leaf)
	return b.String()
}

// evaluations is what the model says a schema costs at the event itself.
func evaluations(s *Schema) uint64 { return s.cost.scale * s.cost.root.evals }

func TestCompileRefusesExponentialSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{
		"allOf, 22 levels (the probe's)": chain(22, "allOf", `{"type":"object"}`),
		"anyOf":                          chain(22, "anyOf", `{"type":"object"}`),
		"oneOf":                          chain(22, "oneOf", `{"type":"object"}`),
		"just past the budget":           chain(8, "allOf", `{}`),
		// The doubling happens one level down each time: a subschema of
		// the member "a" reached by two paths per level of the value.
		"through properties": `{"$defs":{"n":{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}`,
		"through items":      `{"type":"array","items":{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}}`,
		// A union whose members share a recursive field is evaluated
		// twice per level at that field: every member is tried.
		"recursive union": `{"$defs":{
			"add":{"properties":{"op":{"const":"add"},"l":{"$ref":"#"},"r":{"$ref":"#"}}},
			"mul":{"properties":{"op":{"const":"mul"},"l":{"$ref":"#"},"r":{"$ref":"#"}}}},
			"oneOf":[{"$ref":"#/$defs/add"},{"$ref":"#/$defs/mul"},{"type":"number"}]}`,
		"dependentSchemas": `{"$defs":{"n":{"dependentSchemas":{"a":{"$ref":"#/$defs/m"},"b":{"$ref":"#/$defs/m"}}},
			"m":{"properties":{"x":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}`,
	}
	for name, schema := range schemas {
		_, err := Compile([]byte(schema))
		require.ErrorContains(t, err, fmt.Sprintf("more than the budget of %d", MaxEvaluations), name)
	}
	_, err := Compile([]byte(chain(22, "allOf", `{}`)))
	require.ErrorContains(t, err, "would be evaluated 16777214 times at one place of an event (at the event itself)")
	_, err = Compile([]byte(schemas["through properties"]))
	require.ErrorContains(t, err, "(at /a/a/a/a/a/a/a/a/a)", "the message says where")
	_, err = Compile([]byte(`{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`))
	require.ErrorContains(t, err, `applies "#/$defs/a" to the same place in the value again and again without end`)
}

func TestCompileAcceptsRecursiveSchemas(t *testing.T) {
	t.Parallel()
	for name, schema := range map[string]string{
		"tree": `{"type":"object","required":["name"],"properties":{
			"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`,
		"binary tree":     `{"type":"object","properties":{"v":{"type":"integer"},"left":{"$ref":"#"},"right":{"$ref":"#"}}}`,
		"linked list":     `{"$defs":{"node":{"type":["object","null"],"properties":{"next":{"$ref":"#/$defs/node"}}}},"$ref":"#/$defs/node"}`,
		"any JSON":        `{"anyOf":[{"type":["string","number","boolean","null"]},{"type":"array","items":{"$ref":"#"}},{"type":"object","additionalProperties":{"$ref":"#"}}]}`,
		"mutual":          `{"$defs":{"a":{"properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"properties":{"a":{"$ref":"#/$defs/a"}},"items":{"$ref":"#/$defs/a"}}},"$ref":"#/$defs/a"}`,
		"prefixItems":     `{"type":"array","prefixItems":[{"$ref":"#"},{"type":"string"}],"items":{"$ref":"#"}}`,
		"patternProperty": `{"type":"object","patternProperties":{"^x-":{"$ref":"#"}},"additionalProperties":{"type":"string"}}`,
		"dynamicRef":      strictTree,
		"draft 7": `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"object",
			"properties":{"kids":{"type":"array","items":{"$ref":"#/definitions/n"}}}}},"$ref":"#/definitions/n"}`,
		"wide union": wideUnion(60),
	} {
		sch, err := Compile([]byte(schema))
		require.NoError(t, err, name)
		require.LessOrEqual(t, evaluations(sch), uint64(MaxEvaluations), name)
	}
}

// strictTree is the $dynamicRef example of JSON Schema 2020-12: a tree
// schema extended to refuse unknown members at every level.
const strictTree = `{"$id":"https://example.com/strict-tree","$dynamicAnchor":"node","$ref":"tree","unevaluatedProperties":false,
	"$defs":{"tree":{"$id":"tree","$dynamicAnchor":"node","type":"object",
		"properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}}}`

// wideUnion is a catalogue-style schema: a oneOf of n shapes that share a
// base through allOf, each with its own properties.
func wideUnion(n int) string {
	var shapes []string
	for i := range n {
		shapes = append(shapes, fmt.Sprintf(`{"allOf":[{"$ref":"#/$defs/base"},{"properties":{"kind":{"const":"k%d"},"f%d":{"type":"string"}}}]}`, i, i))
	}
	return `{"$defs":{"base":{"type":"object","required":["kind"],"properties":{"kind":{"type":"string"},"id":{"$ref":"#/$defs/id"},` +
		`"meta":{"type":"object","additionalProperties":{"type":"string"}}}},"id":{"type":"string","pattern":"^[a-z0-9_]+$"}},` +
		`"oneOf":[` + strings.Join(shapes, ",") + `]}`
}

// atBudget is a schema that spends almost all the budget at the event
// itself: an allOf of three $refs per level, five levels, the rest in
// plain subschemas. Its leaf fails for a string "bad".
func atBudget(t testing.TB) *Schema {
	t.Helper()
	base := chain3(5)
	sch, err := Compile([]byte(base))
	require.NoError(t, err)
	pad := MaxEvaluations - int(evaluations(sch)) - 1
	schema := strings.Replace(base, `{"$ref":"#/$defs/d0"`, `{"allOf":[`+strings.Repeat(`{"type":"object"},`, pad)+`{"$ref":"#/$defs/d0"}]`, 1)
	sch, err = Compile([]byte(schema))
	require.NoError(t, err)
	require.Equal(t, uint64(MaxEvaluations), evaluations(sch))
	_, err = Compile([]byte(strings.Replace(schema, `{"type":"object"},`, `{"type":"object"},{},`, 1)))
	require.ErrorContains(t, err, "more than the budget", "one more subschema is past it")
	return sch
}

func chain3(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range levels {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"object","properties":{"s":{"not":{"const":"bad"}}}}}}`, levels)
	return b.String()
}

// TestAtBudget: a schema at the budget validates, and its failure is
// described in a few hundred bytes however many paths fail.
func TestAtBudget(t *testing.T) {
	t.Parallel()
	sch := atBudget(t)
	require.Nil(t, check(t, sch, `{"s":"good"}`))
	v := check(t, sch, `{"s":"bad","x":[1,2,3]}`)
	require.NotNil(t, v)
	require.Equal(t, "/s", v.Location)
	require.LessOrEqual(t, len(v.Message), maxMessage)
}

func TestCheckPricesBeforeValidating(t *testing.T) {
	t.Parallel()
	sch, err := Compile([]byte(`{"type":"object","properties":{"xs":{"type":"array","items":{"type":"integer"}}}}`))
	require.NoError(t, err)
	doc := `{"xs":[` + strings.Repeat("1,", 999) + `1]}`
	b := pricesOnly(MaxRequestCost)
	require.Nil(t, must(sch.Check([]byte(doc), b)))
	spent := b.Spent()
	require.GreaterOrEqual(t, spent, uint64(1001), "each element is evaluated")

	// A budget that cannot pay is refused before anything is validated.
	small := pricesOnly(spent - 1)
	v, err := sch.Check([]byte(`{"xs":[`+strings.Repeat(`"not an integer",`, 999)+`1]}`), small)
	require.Nil(t, v)
	var over *OverBudgetError
	require.True(t, errors.As(err, &over), "%v", err)
	require.Zero(t, small.Spent())

	// One request's budget is shared by its events.
	b = pricesOnly(spent * 2)
	require.Nil(t, must(sch.Check([]byte(doc), b)))
	require.Nil(t, must(sch.Check([]byte(doc), b)))
	_, err = sch.Check([]byte(doc), b)
	require.ErrorAs(t, err, &over)
	require.Contains(t, err.Error(), "post fewer or smaller events at once")

	// Enum values and object members count too.
	wide, err := Compile([]byte(`{"additionalProperties":{"enum":[` + strings.Repeat(`"a",`, 99) + `"b"]}}`))
	require.NoError(t, err)
	b = pricesOnly(MaxRequestCost)
	require.Nil(t, must(wide.Check([]byte(`{"k1":"b","k2":"b"}`), b)))
	require.GreaterOrEqual(t, b.Spent(), uint64(200))
}

func must(v *Violation, err error) *Violation {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPriceBoundsEvaluations counts the validator's evaluations with a
// vocabulary that sees every schema object evaluated, and checks that the
// price is never below them (it is an upper bound) nor far above.
func TestPriceBoundsEvaluations(t *testing.T) {
	t.Parallel()
	cases := []struct{ schema, doc string }{
		{invoice, `{"amount":4200,"currency":"EUR","lines":[{"sku":"a-1","qty":1},{"sku":"b-2"}],"note":"x"}`},
		{`{"type":"object","properties":{"v":{"type":"integer"},"left":{"$ref":"#"},"right":{"$ref":"#"}}}`,
			`{"v":1,"left":{"v":2,"left":{"v":3},"right":{"v":4}},"right":{"v":5,"right":{"v":6,"left":{}}}}`},
		{chain(5, "allOf", `{"type":"object"}`), `{"a":{"b":[1,2,3]}}`},
		{`{"anyOf":[{"type":["string","number","boolean","null"]},{"type":"array","items":{"$ref":"#"}},{"type":"object","additionalProperties":{"$ref":"#"}}]}`,
			`{"a":[1,"x",{"b":[null,true,[[]]]}],"c":{}}`},
		{`{"type":"array","prefixItems":[{"type":"string"},{"$ref":"#"}],"items":{"type":"integer"},"contains":{"type":"string"}}`,
			`["a",["b",["c"],1],1,2]`},
		{`{"patternProperties":{"^x":{"type":"string"},"y$":{"type":"string"}},"additionalProperties":{"type":"integer"},"properties":{"xy":{}}}`,
			`{"xy":"s","xa":"s","ay":"s","b":1,"c":2}`},
		{strictTree, `{"data":1,"children":[{"children":[{"data":2},{"children":[]}]},{}]}`},
		{`{"$defs":{"tree":{"$id":"https://example.com/tree","$dynamicAnchor":"node","type":"object",
			"properties":{"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}},"$ref":"https://example.com/tree"}`,
			`{"children":[{"children":[{},{"children":[]}]},{}]}`},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object",
			"properties":{"kids":{"type":"array","items":{"$recursiveRef":"#"}}}}`,
			`{"kids":[{"kids":[{},{"kids":[]}]},{}]}`},
	}
	for _, tc := range cases {
		sch, err := Compile([]byte(tc.schema))
		require.NoError(t, err)
		b := pricesOnly(MaxRequestCost)
		require.Nil(t, must(sch.Check([]byte(tc.doc), b)), tc.schema)
		price := b.Spent()
		evaluated := countEvaluations(t, tc.schema, tc.doc)
		require.GreaterOrEqual(t, price, evaluated, "%s\n%s", tc.schema, tc.doc)
		require.LessOrEqual(t, price, 12*evaluated, "%s\n%s", tc.schema, tc.doc)
		t.Logf("price %d for %d evaluations", price, evaluated)
	}
}

// countEvaluations validates doc against schema with a vocabulary whose
// keyword-less extension runs once for every schema object evaluated.
func countEvaluations(t *testing.T, schema, doc string) uint64 {
	t.Helper()
	var n uint64
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL: "sluice:count",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return counter{&n}, nil
		},
	})
	c.AssertVocabs()
	parsed, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	require.NoError(t, c.AddResource(schemaURL, parsed))
	sch, err := c.Compile(schemaURL)
	require.NoError(t, err)
	value, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(value))
	require.NotZero(t, n, "the counter ran")
	return n
}

type counter struct{ n *uint64 }

func (c counter) Validate(*jsonschema.ValidatorContext, any) { *c.n++ }

// BenchmarkCheckAtBudget is the cost of validating an event against a
// schema that spends the whole evaluation budget at the event itself: the
// most one place of an event can cost. "fails" includes finding and
// describing the failure.
func BenchmarkCheckAtBudget(b *testing.B) {
	sch := atBudget(b)
	for name, doc := range map[string]string{"valid": `{"s":"good","n":1}`, "fails": `{"s":"bad","n":1}`} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				v, err := sch.Check([]byte(doc), NewBudget(MaxRequestCost))
				if err != nil || (v == nil) != (name == "valid") {
					b.Fatal(v, err)
				}
			}
		})
	}
}

// BenchmarkCheckLargePayload prices and validates a payload of 2,000
// invoice lines, reporting the nanoseconds per unit of price: what
// MaxRequestCost is worth in time.
func BenchmarkCheckLargePayload(b *testing.B) {
	sch, err := Compile([]byte(invoice))
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Repeat(`{"sku":"a-1","qty":1,"note":"x"},`, 1999) + `{"sku":"z"}`
	doc := []byte(`{"amount":4200,"currency":"EUR","lines":[` + lines + `]}`)
	budget := pricesOnly(MaxRequestCost)
	if v, err := sch.Check(doc, budget); v != nil || err != nil {
		b.Fatal(v, err)
	}
	start := cpuTime()
	price := budget.Spent()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if v, err := sch.Check(doc, NewBudget(MaxRequestCost)); v != nil || err != nil {
			b.Fatal(v, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(price), "ns/unit")
	b.ReportMetric(cpuSince(start)/float64(b.N)/float64(price), "cpu-ns/unit")
	b.ReportMetric(float64(price), "units")
}

// reportCPU reports the process's CPU time per operation (cpu-ns/op)
// beside the wall time, which a busy machine stretches: call it before the
// loop and the function it returns after.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(cpuSince(start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

func cpuSince(start syscall.Rusage) float64 {
	end := cpuTime()
	ns := func(ru syscall.Rusage) int64 { return ru.Utime.Nano() + ru.Stime.Nano() }
	return float64(ns(end) - ns(start))
}

// TestCompileBoundsItsOwnWork: pricing a schema is itself bounded; a
// schema with hundreds of recursive members, each a distinct subschema,
// is refused as too complex, while as many plain $ref members are one
// state and cheap.
func TestCompileBoundsItsOwnWork(t *testing.T) {
	t.Parallel()
	members := func(n int, member string) string {
		var list []string
		for i := range n {
			list = append(list, fmt.Sprintf(`"a%d":%s`, i, member))
		}
		return `{"properties":{` + strings.Join(list, ",") + `}}`
	}
	_, err := Compile([]byte(members(300, `{"$ref":"#","properties":{"z":{}}}`)))
	require.ErrorIs(t, err, errTooComplex)
	sch, err := Compile([]byte(members(2000, `{"$ref":"#"}`)))
	require.NoError(t, err)
	require.Less(t, sch.cost.work, maxModelWork/10)

	_, err = Compile([]byte(strings.Repeat(`{"properties":{"a":`, 81) + "{}" + strings.Repeat("}}", 81)))
	require.ErrorContains(t, err, "must nest arrays and objects at most 160 deep")
	_, err = Compile([]byte(`{"anyOf":[` + strings.Repeat(`{},`, MaxSchemaObjects) + `{}]}`))
	require.ErrorContains(t, err, "must hold at most 4096 objects")
}
