package eventschema

import (
	"errors"
	"math"
	"math/bits"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The validator evaluates a subschema once for every path by which it is
// reached. $ref, $dynamicRef, allOf, anyOf, oneOf, not, if/then/else and
// dependentSchemas apply schemas at the same place in the value ("in
// place"); properties, items and the like apply them one level down. A
// schema that reaches one subschema by 2^n in-place paths costs 2^n
// evaluations at one place of every event, whatever the event: that is
// what the budget refuses. Recursion through properties or items is fine
// by itself, since each turn of it is one level of the value, and values
// nest at most MaxDepth deep; it is refused only when it also multiplies
// (each level reaching the next by two paths).
//
// The cost model is a small automaton over the schema graph. A state is
// the multiset of schemas evaluated at one place of a value; a step along
// an object member or array element gives the multiset evaluated at the
// child. Compile explores every state reachable within MaxDepth steps and
// refuses the schema if any holds more than MaxEvaluations; Check walks an
// event along the same automaton to price it before validating it. Where
// the model cannot tell (which pattern matches a name not listed in
// properties, which of then or else applies, what $dynamicRef resolves
// to), it counts every possibility, so its prices are upper bounds.

// errTooComplex refuses a schema whose graph is too large to price.
var errTooComplex = errors.New("is too complex to check against the evaluation budget; split or simplify it")

// maxModelWork bounds the work of pricing a schema at Compile, and so its
// time and the memory the model keeps: the steps taken and schema nodes
// touched while exploring its states. Large legitimate schemas take a few
// thousand; a few hundred recursive members, each its own subschema,
// reach it.
const maxModelWork = 200_000

// infinite is where counts saturate: far past any budget, far from
// overflowing a sum of two.
const infinite = math.MaxUint64 / 4

func add(a, b uint64) uint64 { return min(a+b, infinite) } // both ≤ infinite: no overflow

func mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return infinite
	}
	return min(lo, infinite)
}

// gnode is one compiled (sub)schema and the schemas it applies.
type gnode struct {
	s       *jsonschema.Schema
	topo    int32   // position in a topological order of in-place edges
	inplace []int32 // applied at the same place

	props      map[string]int32 // properties
	patterns   []pattern        // patternProperties
	additional int32            // additionalProperties, or -1
	anyKey     []int32          // unevaluatedProperties, propertyNames: any member
	prefix     []int32          // prefixItems (items as an array before 2020-12)
	items      int32            // items (additionalItems before 2020-12) past prefix, or -1
	anyIndex   []int32          // contains, unevaluatedItems: any element

	weight   uint64 // evaluating it once: 1, plus one per enum value compared
	perKey   uint64 // per member of an object: 1, plus one per pattern matched
	perByte  uint64 // per byte of a string: its pattern's and format's steps (textWork)
	keyByte  uint64 // per byte of a member's name: its patternProperties' steps
	uniqueOf bool   // uniqueItems: hashes every element
	leaf     bool   // applies nothing below its place, and hashes nothing
}

type pattern struct {
	re   jsonschema.Regexp
	node int32
}

// labelKind is what a step of the automaton goes along.
type labelKind uint8

const (
	namedKey   labelKind = iota // a member listed in some schema's properties
	otherKey                    // any other member
	indexAt                     // an element covered by some schema's prefixItems
	otherIndex                  // any later element
)

type label struct {
	kind  labelKind
	key   string
	index int
}

func (l label) String() string {
	switch l.kind {
	case namedKey:
		return "/" + escapePointer(l.key)
	case otherKey:
		return "/(any member)"
	case indexAt:
		return "/" + strconv.Itoa(l.index)
	default:
		return "/(any element)"
	}
}

// entry is a schema and how many times it is evaluated.
type entry struct {
	node int32
	n    uint64
}

// state is a multiset of schemas evaluated at one place, divided by the
// greatest common divisor of its counts (the step that leads to it
// carries that factor), so that states met at several depths are shared.
// Only the schemas that apply something below are listed; the others are
// in the sums.
type state struct {
	entries []entry
	evals   uint64 // Σ n: evaluations
	base    uint64 // Σ n·weight
	perKey  uint64 // Σ n·perKey, per member of an object
	perByte uint64 // Σ n·perByte, per byte of a string, in steps
	keyByte uint64 // Σ n·keyByte, per byte of a member's name, in steps
	unique  uint64 // Σ n over uniqueItems schemas, per node below an array
	names   map[string]struct{}
	prefix  int // longest prefix
	next    map[label]step
}

// step is where a label leads: the state there times scale; to is nil when
// no schema applies there.
type step struct {
	to    *state
	scale uint64
}

// model is a compiled schema's cost model.
type model struct {
	nodes  []gnode
	index  map[*jsonschema.Schema]int32
	root   *state
	scale  uint64
	states map[string]*state
	frozen bool // after Compile: read-only, safe for concurrent use
	work   int
	sc     scratch
}

// scratch is the working memory of one closure computation.
type scratch struct {
	count   []uint64
	seen    []bool
	touched []int32
}

// newModel builds the cost model of a compiled schema and checks it
// against the budget: at most MaxEvaluations evaluations at any one place
// of a value nested at most MaxDepth deep.
func newModel(root *jsonschema.Schema, doc any) (*model, error) {
	m := &model{states: map[string]*state{}, index: map[*jsonschema.Schema]int32{}}
	m.add(root)
	if err := m.order(doc); err != nil {
		return nil, err
	}
	m.sc = newScratch(len(m.nodes))
	var err error
	if m.root, m.scale, err = m.closure([]entry{{node: 0, n: 1}}, &m.sc); err != nil {
		return nil, err
	}
	if err := m.explore(); err != nil {
		return nil, err
	}
	m.frozen = true
	return m, nil
}

func newScratch(n int) scratch {
	return scratch{count: make([]uint64, n), seen: make([]bool, n)}
}
