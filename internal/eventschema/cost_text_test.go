package eventschema

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// patternProbe is the probe's schema: outer alternatives of inner
// alternatives, each leaf checking one property against a pattern that
// backtracking engines take exponential time on and Go's linear engine
// takes a time proportional to the string's length.
func patternProbe(outer, inner int, last string) string {
	leaf := `{"properties":{"s":{"pattern":"^(a+)+$"}}}`
	var alts []string
	for range outer {
		var in []string
		for range inner {
			in = append(in, leaf)
		}
		alts = append(alts, `{"anyOf":[`+strings.Join(in, ",")+`]}`)
	}
	if last != "" {
		alts = append(alts, `{"properties":{"s":{"pattern":"`+last+`"}}}`)
	}
	return `{"anyOf":[` + strings.Join(alts, ",") + `]}`
}

// TestPatternPricedByLength: a pattern costs per byte of the string it
// reads, so the probe's schema (900 patterns, under the evaluation budget)
// is refused before validation for a long string, whether the event would
// pass or fail, while short strings still validate.
func TestPatternPricedByLength(t *testing.T) {
	t.Parallel()
	for _, last := range []string{"", "b$"} { // failing, then passing events
		sch, err := Compile([]byte(patternProbe(30, 30, last)))
		require.NoError(t, err, "the schema is within the evaluation budget")
		for _, n := range []int{250_000, 48 << 10, 9 << 10} {
			b := pricesOnly(MaxRequestCost)
			v, err := sch.Check([]byte(`{"s":"`+strings.Repeat("a", n)+`b"}`), b)
			require.Nil(t, v)
			var over *OverBudgetError
			require.ErrorAs(t, err, &over, "%d bytes, last %q", n, last)
			require.Zero(t, b.Spent(), "refused before validating")
		}
		b := pricesOnly(MaxRequestCost)
		_, err = sch.Check([]byte(`{"s":"aaaa"}`), b)
		require.NoError(t, err, "a short string is cheap")
		require.Less(t, b.Spent(), uint64(10_000))
	}

	// Price grows with the string and with the pattern's size.
	price := func(schema, s string) uint64 {
		sch, err := Compile([]byte(schema))
		require.NoError(t, err)
		b := pricesOnly(MaxRequestCost)
		_, err = sch.Check([]byte(`{"s":"`+s+`"}`), b)
		require.NoError(t, err)
		return b.Spent()
	}
	small := `{"properties":{"s":{"pattern":"^a+$"}}}`
	large := `{"properties":{"s":{"pattern":"^(a|b|c|d|e|f|g|h)+[a-z]*$"}}}`
	long := strings.Repeat("a", 100_000)
	require.Greater(t, price(small, long), 10*price(small, strings.Repeat("a", 1000)))
	require.Greater(t, price(large, long), price(small, long))
	// A pattern on member names costs per byte of each name.
	names := `{"patternProperties":{"^(a+)+$":{}}}`
	sch, err := Compile([]byte(names))
	require.NoError(t, err)
	b := pricesOnly(MaxRequestCost)
	_, err = sch.Check([]byte(`{"`+long+`":1}`), b)
	require.NoError(t, err)
	require.Greater(t, b.Spent(), uint64(100_000*9/stepsPerUnit))
}

// BenchmarkPatternStep measures what one step of a pattern (one
// instruction over one byte) costs here, against which stepsPerUnit is
// set: a unit is about a microsecond.
func BenchmarkPatternStep(b *testing.B) {
	for _, p := range []string{"^(a+)+$", "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$", "^.*$"} {
		re := regexp.MustCompile(p)
		s := strings.Repeat("a", 64<<10) + "b"
		steps := regexpSteps(p) * uint64(len(s))
		b.Run(fmt.Sprintf("%dsteps", regexpSteps(p)), func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				re.MatchString(s)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps), "ns/step")
		})
	}
}

// BenchmarkCheckPatternProbe is what the probe's event costs now: its
// price, not its validation.
func BenchmarkCheckPatternProbe(b *testing.B) {
	sch, err := Compile([]byte(patternProbe(30, 30, "b$")))
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(`{"s":"` + strings.Repeat("a", 250_000) + `b"}`)
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := sch.Check(doc, NewBudget(MaxRequestCost)); err == nil {
			b.Fatal("the probe was validated")
		}
	}
}
