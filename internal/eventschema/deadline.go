package eventschema

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The deadline. A payload's price is an estimate; the deadline is what
// holds if it is wrong. Validation runs in the caller's goroutine, locked
// to its thread, and is timed by the thread's CPU clock (threadCPU): a
// payload may take MaxEventTime, or four times its price at unitTime a unit if
// that is more, and never more than what is left of its request's budget
// (eventDeadline). The validator looks at the clock between evaluations
// and before each pattern it matches (a gate compiled into the schema: a
// vocabulary run at every schema evaluated, and a regexp engine), and
// past the deadline stops the validation where it is: the overrun is at
// most one keyword's work on one value. No goroutine is left working
// after the answer.
//
// A compiled jsonschema.Schema is shared by every request of its tenant,
// and its gate by every validation that uses it, so a Schema keeps copies
// of its compiled validator, each used by one validation at a time.

// MaxEventTime is the CPU time validating one payload may take, however
// cheap its price: the backstop against a price underestimated.
const MaxEventTime = 100 * time.Millisecond

// eventDeadline is the CPU time a payload priced price may take when its
// request has left units left: MaxEventTime, or four times its price if
// that is more (a price is an upper bound, so a payload priced right
// finishes well within, even on a machine busy enough to slow a thread's
// work twofold), but no more than the request has left.
func eventDeadline(price, left uint64) time.Duration {
	return min(fromUnits(left), max(MaxEventTime, 4*fromUnits(price))) * raceSlowdown
}

// unitTime is what a unit of price stands for in CPU time: a request may
// spend MaxRequestCost units, so MaxRequestCost × unitTime on validation.
// A validation that takes longer than its price says is charged for the
// time it took.
const unitTime = time.Microsecond

// Work between two looks at the clock: an evaluation counts evalWork,
// a pattern the bytes it reads. A look costs about a system call, a
// fraction of a microsecond.
const (
	evalWork   = 256
	checkEvery = 16 << 10
)

// freeValidators is how many idle copies of its validator a Schema keeps:
// more concurrent validations of one schema compile copies they drop.
var freeValidators = max(4, runtime.GOMAXPROCS(0))

// processStart is where threadCPU counts from where it falls back to
// the clock on the wall.
var processStart = time.Now()

// OverTimeError refuses a payload whose validation took longer than it
// may: it was stopped at Limit, its deadline.
type OverTimeError struct {
	Limit time.Duration
}

func (e *OverTimeError) Error() string {
	return fmt.Sprintf("took more than %v of CPU time to validate against its schema, and validating an event may take %v "+
		"or four times its price at %v a unit, a request's events %v together: post fewer or smaller events at once, or simplify the schema",
		e.Limit, MaxEventTime, unitTime, time.Duration(MaxRequestCost)*unitTime)
}

// toUnits is d in units, rounded down; fromUnits is n units in time, at
// most a day.
func toUnits(d time.Duration) uint64 { return uint64(max(d, 0) / unitTime) }

func fromUnits(n uint64) time.Duration {
	return time.Duration(min(n, uint64(24*time.Hour/unitTime))) * unitTime
}

// validator is one compiled copy of a schema, with the gate its keywords
// pass through.
type validator struct {
	full  *jsonschema.Schema
	quick *jsonschema.Schema // not(not(full)): stops at the first failure
	gate  *gate
}

// compileValidator compiles schema and its quick wrapper in one compiler,
// their keywords gated by a gate of their own.
func compileValidator(schema []byte) (*validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	g := &gate{}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.UseRegexpEngine(g.compile)
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL: "sluice:deadline",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return g, nil // for every schema object, with or without keywords
		},
	})
	c.AssertVocabs() // user vocabularies apply in 2019-09 and later too
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %w", err)
	}
	// Validation inside "not" only asks whether the value is valid, so it
	// stops at the first failure instead of building every error.
	wrapper := map[string]any{"not": map[string]any{"not": map[string]any{"$ref": schemaURL}}}
	if err := c.AddResource(quickURL, wrapper); err != nil {
		return nil, fmt.Errorf("add the wrapper schema: %w", err)
	}
	full, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", oneLine(err.Error()))
	}
	quick, err := c.Compile(quickURL)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", oneLine(err.Error()))
	}
	return &validator{full: full, quick: quick, gate: g}, nil
}

// take returns an idle copy of s's validator, compiling one if none is.
func (s *Schema) take() (*validator, error) {
	select {
	case v := <-s.free:
		return v, nil
	default:
	}
	v, err := compileValidator(s.source)
	if err != nil {
		return nil, fmt.Errorf("compile a copy of the schema: %w", err)
	}
	return v, nil
}

// put returns v to s's idle copies, or drops it when there are enough.
func (s *Schema) put(v *validator) {
	v.gate.disarm()
	select {
	case s.free <- v:
	default:
	}
}

// timed runs validate on the calling goroutine locked to its thread,
// under a deadline of limit of the thread's CPU time (clock). It returns
// how long validate took, and whether the deadline stopped it.
func (v *validator) timed(clock func() time.Duration, limit time.Duration, validate func()) (took time.Duration, stopped bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := clock()
	v.gate.arm(clock, start+limit)
	defer func() {
		took = clock() - start
		if r := recover(); r != nil {
			if r != errDeadline {
				panic(r)
			}
			stopped = true
		}
	}()
	validate()
	return 0, false
}

// deadlinePassed is what a gate panics with past its deadline; timed
// recovers it.
type deadlinePassed struct{}

var errDeadline any = deadlinePassed{}

// gate is a validator's look at the clock. It is armed by one validation
// at a time (the copy's), so it needs no lock.
type gate struct {
	clock  func() time.Duration
	stopAt time.Duration
	armed  bool
	work   int
}

func (g *gate) arm(clock func() time.Duration, stopAt time.Duration) {
	g.clock, g.stopAt, g.armed, g.work = clock, stopAt, true, 0
}

func (g *gate) disarm() { g.armed, g.clock = false, nil }

// pass counts work about to be done, and stops the validation (a panic
// timed recovers) when the deadline has passed. A large piece of work
// looks at the clock before it starts.
func (g *gate) pass(work int) {
	if !g.armed {
		return
	}
	if g.work += work; g.work < checkEvery {
		return
	}
	g.work = 0
	if g.clock() >= g.stopAt {
		panic(errDeadline)
	}
}

// Validate is the gate's vocabulary: it runs at every schema evaluated.
func (g *gate) Validate(*jsonschema.ValidatorContext, any) { g.pass(evalWork) }

// compile is the gate's regexp engine: Go's, its matches gated. The
// value of "format": "regex" is compiled through it too.
func (g *gate) compile(expr string) (jsonschema.Regexp, error) {
	g.pass(len(expr) * 8)
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("compile pattern: %w", err)
	}
	return gatedRegexp{re: re, gate: g}, nil
}

type gatedRegexp struct {
	re   *regexp.Regexp
	gate *gate
}

func (r gatedRegexp) MatchString(s string) bool {
	r.gate.pass(len(s))
	return r.re.MatchString(s)
}

func (r gatedRegexp) String() string { return r.re.String() }

// ungated is re without its gate, for the cost model, which matches
// member names while any validation runs.
func ungated(re jsonschema.Regexp) jsonschema.Regexp {
	if g, ok := re.(gatedRegexp); ok {
		return g.re
	}
	return re
}
