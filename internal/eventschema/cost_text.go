package eventschema

import (
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Pricing the keywords whose work grows with the text they read. A Go
// regular expression matches in time linear in its input, but the factor
// is the size of its program: each byte of the input may step every
// instruction once. On this kind of hardware a step costs a few
// nanoseconds (BenchmarkPatternStep), so stepsPerUnit steps are priced as
// one unit, about a microsecond, with room to spare.

// stepsPerUnit is how many steps (instructions × bytes) make one unit.
const stepsPerUnit = 128

// textSteps is what a keyword that reads its text once costs per byte:
// format checks, length counting, content decoding.
const textSteps = 4

// formatRegexSteps is what "format": "regex" costs per byte: the value is
// compiled as a regular expression.
const formatRegexSteps = 64

// textWork is what a schema's text keywords cost per byte of a string,
// in steps.
func textWork(s *jsonschema.Schema) uint64 {
	var steps uint64
	if s.Pattern != nil {
		steps = add(steps, regexpSteps(s.Pattern.String()))
	}
	if s.MinLength != nil || s.MaxLength != nil {
		steps = add(steps, textSteps)
	}
	if s.Format != nil {
		if s.Format.Name == "regex" {
			steps = add(steps, formatRegexSteps)
		} else {
			steps = add(steps, textSteps)
		}
	}
	if s.ContentEncoding != nil || s.ContentMediaType != nil {
		steps = add(steps, 2*textSteps)
	}
	return steps
}

// regexpSteps is the size of re's program: the steps it may take per
// byte of input. A pattern Go's parser reads differently from the
// validator's (ECMA-262 syntax) is priced by its length, twice over.
func regexpSteps(re string) uint64 {
	parsed, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return uint64(2 * max(len(re), 1))
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return uint64(2 * max(len(re), 1))
	}
	return uint64(max(len(prog.Inst), 1))
}

// textUnits is steps per byte over n bytes, in units, rounded up when
// there is any work at all.
func textUnits(stepsPerByte uint64, n int) uint64 {
	if stepsPerByte == 0 || n == 0 {
		return 0
	}
	return add(mul(stepsPerByte, uint64(n)), stepsPerUnit-1) / stepsPerUnit
}
