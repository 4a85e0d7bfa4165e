package eventschema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/url"
	"slices"
	"strconv"
	"strings"

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

// add adds s and every schema it reaches to the graph, returning its
// index.
func (m *model) add(s *jsonschema.Schema) int32 {
	if i, ok := m.index[s]; ok {
		return i
	}
	i := int32(len(m.nodes))
	m.index[s] = i
	m.nodes = append(m.nodes, gnode{s: s, additional: -1, items: -1})
	sub := m.add
	var (
		inplace, anyKey, anyIndex, prefix []int32
		props                             map[string]int32
		patterns                          []pattern
		additional, items                 = int32(-1), int32(-1)
	)
	one := func(list *[]int32, t *jsonschema.Schema) {
		if t != nil {
			*list = append(*list, sub(t))
		}
	}
	one(&inplace, s.Ref)
	one(&inplace, s.RecursiveRef)
	if s.DynamicRef != nil {
		one(&inplace, s.DynamicRef.Ref)
	}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, t := range list {
			one(&inplace, t)
		}
	}
	one(&inplace, s.Not)
	one(&inplace, s.If)
	one(&inplace, s.Then)
	one(&inplace, s.Else)
	for _, name := range sortedKeys(s.DependentSchemas) {
		one(&inplace, s.DependentSchemas[name])
	}
	for _, name := range sortedKeys(s.Dependencies) {
		if t, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
			one(&inplace, t)
		}
	}
	for _, name := range sortedKeys(s.Properties) {
		if props == nil {
			props = map[string]int32{}
		}
		props[name] = sub(s.Properties[name])
	}
	for re, t := range s.PatternProperties {
		patterns = append(patterns, pattern{re: re, node: sub(t)})
	}
	slices.SortFunc(patterns, func(a, b pattern) int { return strings.Compare(a.re.String(), b.re.String()) })
	if t, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		additional = sub(t)
	}
	one(&anyKey, s.UnevaluatedProperties)
	one(&anyKey, s.PropertyNames) // it sees the name, not the value: counted there all the same
	switch it := s.Items.(type) {
	case []*jsonschema.Schema:
		for _, t := range it {
			one(&prefix, t)
		}
	case *jsonschema.Schema:
		items = sub(it)
	}
	if t, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		items = sub(t)
	}
	for _, t := range s.PrefixItems {
		one(&prefix, t)
	}
	if s.Items2020 != nil {
		items = sub(s.Items2020)
	}
	one(&anyIndex, s.Contains)
	one(&anyIndex, s.UnevaluatedItems)

	n := &m.nodes[i]
	n.inplace, n.props, n.patterns, n.additional = inplace, props, patterns, additional
	n.anyKey, n.prefix, n.items, n.anyIndex = anyKey, prefix, items, anyIndex
	n.weight = 1
	if s.Enum != nil {
		n.weight += uint64(len(s.Enum.Values))
	}
	n.perKey = 1 + uint64(len(patterns))
	n.uniqueOf = s.UniqueItems
	n.leaf = !n.uniqueOf && len(props) == 0 && len(patterns) == 0 && additional < 0 && len(anyKey) == 0 &&
		len(prefix) == 0 && items < 0 && len(anyIndex) == 0
	return i
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// order adds the targets $dynamicRef and $recursiveRef may resolve to at
// run time, then orders the in-place edges topologically. A cycle of them
// is a schema applying itself at the same place without end: refused.
//
// A dynamic reference resolves to the outermost resource in scope with
// the anchor. The document's root resource is always the outermost, so
// when it has the anchor that is the one target (the usual pattern:
// extending a recursive schema); otherwise the model counts every schema
// with the anchor, not knowing which is in scope.
func (m *model) order(doc any) error {
	dynamic := map[string][]int32{}
	rootDynamic := map[string]int32{}
	var recursive []int32
	for i := range m.nodes {
		s := m.nodes[i].s
		if s.DynamicAnchor != "" {
			dynamic[s.DynamicAnchor] = append(dynamic[s.DynamicAnchor], int32(i))
			if inRootResource(doc, s.Location) {
				rootDynamic[s.DynamicAnchor] = int32(i)
			}
		}
		if s.RecursiveAnchor {
			recursive = append(recursive, int32(i))
		}
	}
	for i := range m.nodes {
		n := &m.nodes[i]
		if d := n.s.DynamicRef; d != nil && d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
			if r, ok := rootDynamic[d.Anchor]; ok {
				n.inplace = replace(n.inplace, m.index[d.Ref], r)
			} else {
				n.inplace = appendOthers(n.inplace, dynamic[d.Anchor], m.index[d.Ref])
			}
		}
		if r := n.s.RecursiveRef; r != nil && r.RecursiveAnchor {
			if m.nodes[0].s.RecursiveAnchor {
				n.inplace = replace(n.inplace, m.index[r], 0)
			} else {
				n.inplace = appendOthers(n.inplace, recursive, m.index[r])
			}
		}
	}

	const (
		unseen = iota
		open
		done
	)
	mark := make([]uint8, len(m.nodes))
	post := make([]int32, 0, len(m.nodes))
	type frame struct{ node, next int32 }
	for start := range m.nodes {
		if mark[start] != unseen {
			continue
		}
		stack := []frame{{node: int32(start)}}
		mark[start] = open
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			edges := m.nodes[top.node].inplace
			if int(top.next) == len(edges) {
				mark[top.node] = done
				post = append(post, top.node)
				stack = stack[:len(stack)-1]
				continue
			}
			child := edges[top.next]
			top.next++
			switch mark[child] {
			case open:
				return fmt.Errorf("applies %s to the same place in the value again and again without end (a $ref or applicator cycle)",
					schemaName(m.nodes[child].s))
			case unseen:
				mark[child] = open
				stack = append(stack, frame{node: child})
			}
		}
	}
	for pos, i := range post {
		m.nodes[i].topo = int32(len(post) - 1 - pos) // parents before children
	}
	return nil
}

// replace replaces the first old in list with new.
func replace(list []int32, old, new int32) []int32 {
	if i := slices.Index(list, old); i >= 0 {
		list[i] = new
	}
	return list
}

// inRootResource reports whether the schema at location (a JSON pointer
// into doc, after schemaURL#) belongs to the document's root resource: no
// schema on the way down to it, itself included, has an $id.
func inRootResource(doc any, location string) bool {
	ptr, ok := strings.CutPrefix(location, schemaURL+"#")
	if !ok {
		return false
	}
	ptr, err := url.PathUnescape(ptr)
	if err != nil {
		return false
	}
	v := doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		if ptr == "" {
			break
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := v.(type) {
		case map[string]any:
			v = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			v = c[i]
		default:
			return false
		}
		if obj, ok := v.(map[string]any); ok {
			if _, ok := obj["$id"].(string); ok {
				return false
			}
		}
	}
	return true
}

// appendOthers appends the nodes of extra other than except.
func appendOthers(list, extra []int32, except int32) []int32 {
	for _, x := range extra {
		if x != except {
			list = append(list, x)
		}
	}
	return list
}

// schemaName is where a subschema sits in the tenant's schema.
func schemaName(s *jsonschema.Schema) string {
	loc := strings.TrimPrefix(s.Location, schemaURL)
	if loc == "" || loc == "#" {
		return "the schema"
	}
	return strconv.Quote(loc)
}

// closure is the multiset evaluated at one place when the schemas of init
// are applied there: each with everything it applies in place. It returns
// the state and the factor it was divided by.
func (m *model) closure(init []entry, sc *scratch) (*state, uint64, error) {
	sc.touched = sc.touched[:0]
	for _, e := range init {
		if !sc.seen[e.node] {
			sc.seen[e.node] = true
			sc.touched = append(sc.touched, e.node)
		}
		sc.count[e.node] = add(sc.count[e.node], e.n)
	}
	// Everything reachable in place, with its count still to come...
	for i := 0; i < len(sc.touched); i++ {
		for _, c := range m.nodes[sc.touched[i]].inplace {
			if !sc.seen[c] {
				sc.seen[c] = true
				sc.touched = append(sc.touched, c)
			}
		}
	}
	// ...then counts pushed down in topological order.
	slices.SortFunc(sc.touched, func(a, b int32) int { return int(m.nodes[a].topo - m.nodes[b].topo) })
	for _, i := range sc.touched {
		for _, c := range m.nodes[i].inplace {
			sc.count[c] = add(sc.count[c], sc.count[i])
		}
	}
	if !m.frozen {
		if m.work += len(sc.touched); m.work > maxModelWork {
			m.clear(sc)
			return nil, 0, errTooComplex
		}
	}
	// Schemas that apply nothing below this place only add to its cost:
	// they are kept as sums, so that states differing only in them (the
	// many "$ref" wrappers of one recursive schema, say) are one state.
	var (
		entries []entry
		own     cost
		g       uint64
	)
	for _, i := range sc.touched {
		c, n := sc.count[i], &m.nodes[i]
		g = gcd(g, c)
		if n.leaf {
			own = own.plus(c, n)
			continue
		}
		entries = append(entries, entry{node: i, n: c})
	}
	m.clear(sc)
	slices.SortFunc(entries, func(a, b entry) int { return int(a.node - b.node) })
	for i := range entries {
		entries[i].n /= g
	}
	own = cost{evals: own.evals / g, base: own.base / g, perKey: own.perKey / g}
	return m.intern(entries, own), g, nil
}

// cost is what schemas evaluated at one place cost there.
type cost struct {
	evals  uint64 // evaluations
	base   uint64 // evaluations with enum values
	perKey uint64 // per member of an object: evaluations with patterns
}

// plus adds c evaluations of n.
func (o cost) plus(c uint64, n *gnode) cost {
	return cost{evals: add(o.evals, c), base: add(o.base, mul(c, n.weight)), perKey: add(o.perKey, mul(c, n.perKey))}
}

func (m *model) clear(sc *scratch) {
	for _, i := range sc.touched {
		sc.count[i], sc.seen[i] = 0, false
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// intern returns the state of entries, made once (until the model is
// frozen: then a state not met at Compile is made afresh each time).
func (m *model) intern(entries []entry, own cost) *state {
	buf := make([]byte, 0, len(entries)*6+24)
	buf = binary.AppendUvarint(buf, own.evals)
	buf = binary.AppendUvarint(buf, own.base)
	buf = binary.AppendUvarint(buf, own.perKey)
	for _, e := range entries {
		buf = binary.AppendUvarint(buf, uint64(e.node))
		buf = binary.AppendUvarint(buf, e.n)
	}
	if st, ok := m.states[string(buf)]; ok {
		return st
	}
	st := &state{entries: entries, next: map[label]step{}}
	for _, e := range entries {
		n := &m.nodes[e.node]
		own = own.plus(e.n, n)
		if n.uniqueOf {
			st.unique = add(st.unique, e.n)
		}
		for name := range n.props {
			if st.names == nil {
				st.names = map[string]struct{}{}
			}
			st.names[name] = struct{}{}
		}
		st.prefix = max(st.prefix, len(n.prefix))
	}
	st.evals, st.base, st.perKey = own.evals, own.base, own.perKey
	if !m.frozen {
		m.states[string(buf)] = st
	}
	return st
}

// labels are the steps worth distinguishing from st: each member name
// some schema lists, any other member, each element some prefix covers,
// any later element.
func (st *state) labels() []label {
	out := make([]label, 0, len(st.names)+st.prefix+2)
	for _, name := range sortedKeys(st.names) {
		out = append(out, label{kind: namedKey, key: name})
	}
	out = append(out, label{kind: otherKey})
	for i := range st.prefix {
		out = append(out, label{kind: indexAt, index: i})
	}
	return append(out, label{kind: otherIndex})
}

// keyLabel and indexLabel are the labels of a member and an element of a
// value at st.
func (st *state) keyLabel(name string) label {
	if _, ok := st.names[name]; ok {
		return label{kind: namedKey, key: name}
	}
	return label{kind: otherKey}
}

func (st *state) indexLabel(i int) label {
	if i < st.prefix {
		return label{kind: indexAt, index: i}
	}
	return label{kind: otherIndex}
}

// step is where l leads from st.
func (m *model) step(st *state, l label) (step, error) {
	if s, ok := st.next[l]; ok {
		return s, nil
	}
	var init []entry
	apply := func(node int32, n uint64) { init = append(init, entry{node: node, n: n}) }
	for _, e := range st.entries {
		n := &m.nodes[e.node]
		switch l.kind {
		case namedKey, otherKey:
			matched := false
			if t, ok := n.props[l.key]; ok && l.kind == namedKey {
				apply(t, e.n)
				matched = true
			}
			for _, p := range n.patterns {
				if l.kind == otherKey || p.re.MatchString(l.key) {
					apply(p.node, e.n)
					matched = true
				}
			}
			if n.additional >= 0 && (!matched || l.kind == otherKey) {
				apply(n.additional, e.n)
			}
			for _, t := range n.anyKey {
				apply(t, e.n)
			}
		case indexAt, otherIndex:
			switch {
			case l.kind == indexAt && l.index < len(n.prefix):
				apply(n.prefix[l.index], e.n)
			case n.items >= 0:
				apply(n.items, e.n)
			}
			for _, t := range n.anyIndex {
				apply(t, e.n)
			}
		}
	}
	if !m.frozen {
		if m.work += 1 + len(init); m.work > maxModelWork {
			return step{}, errTooComplex
		}
	}
	if len(init) == 0 {
		return m.remember(st, l, step{}), nil
	}
	sc := &m.sc
	if m.frozen {
		fresh := newScratch(len(m.nodes)) // Check runs concurrently; Compile's scratch is its own
		sc = &fresh
	}
	to, scale, err := m.closure(init, sc)
	if err != nil {
		return step{}, err
	}
	return m.remember(st, l, step{to: to, scale: scale}), nil
}

func (m *model) remember(st *state, l label, s step) step {
	if !m.frozen {
		st.next[l] = s
	}
	return s
}

// reach is a state met at some depth: the largest factor it was met with,
// and the place of the value it was met at.
type reach struct {
	st     *state
	factor uint64
	at     string
}

// explore walks every state reachable within MaxDepth steps and refuses
// the schema when any place would take more than MaxEvaluations
// evaluations.
func (m *model) explore() error {
	check := func(r reach) error {
		if n := mul(r.factor, r.st.evals); n > MaxEvaluations {
			at := r.at
			if at == "" {
				at = "the event itself"
			}
			return fmt.Errorf("would be evaluated %s times at one place of an event (at %s), more than the budget of %d: "+
				"a subschema is reached through $ref, allOf, anyOf, oneOf, not, if/then/else or dependentSchemas by too many paths",
				count(n), at, MaxEvaluations)
		}
		return nil
	}
	frontier := []reach{{st: m.root, factor: m.scale}}
	if err := check(frontier[0]); err != nil {
		return err
	}
	// A state met again with no larger factor is explored already: it was
	// met no deeper, so with at least as many levels of the value below.
	best := map[*state]uint64{m.root: m.scale}
	for depth := 1; depth <= MaxDepth && len(frontier) > 0; depth++ {
		next := map[*state]int{}
		var reached []reach
		for _, r := range frontier {
			for _, l := range r.st.labels() {
				s, err := m.step(r.st, l)
				if err != nil {
					return err
				}
				if s.to == nil {
					continue
				}
				to := reach{st: s.to, factor: mul(r.factor, s.scale), at: r.at + l.String()}
				if to.factor <= best[to.st] {
					continue
				}
				best[to.st] = to.factor
				if err := check(to); err != nil {
					return err
				}
				if i, ok := next[s.to]; !ok {
					next[s.to] = len(reached)
					reached = append(reached, to)
				} else {
					reached[i] = to
				}
			}
		}
		frontier = reached
	}
	return nil
}

// count writes n for a message; a saturated count is "more than 10^18".
func count(n uint64) string {
	if n >= infinite {
		return "more than 10^18"
	}
	return strconv.FormatUint(n, 10)
}

// price is what validating v costs: evaluations, with an enum's values and
// an object's members counted one each, and uniqueItems counting every
// node below the array. It stops counting once past limit.
func (m *model) price(v any, limit uint64) uint64 {
	return m.walk(m.root, m.scale, v, limit)
}

func (m *model) walk(st *state, scale uint64, v any, limit uint64) uint64 {
	c := mul(scale, st.base)
	switch v := v.(type) {
	case map[string]any:
		c = add(c, mul(mul(scale, st.perKey), uint64(len(v))))
		for name, child := range v {
			if c > limit {
				return c
			}
			c = add(c, m.descend(st, st.keyLabel(name), scale, child, limit-c))
		}
	case []any:
		if st.unique > 0 {
			c = add(c, mul(mul(scale, st.unique), nodes(v)))
		}
		for i, child := range v {
			if c > limit {
				return c
			}
			c = add(c, m.descend(st, st.indexLabel(i), scale, child, limit-c))
		}
	}
	return c
}

func (m *model) descend(st *state, l label, scale uint64, child any, limit uint64) uint64 {
	s, err := m.step(st, l)
	switch {
	case err != nil:
		return infinite // cannot happen once frozen: the work bound is Compile's
	case s.to == nil:
		return 0
	}
	return m.walk(s.to, mul(scale, s.scale), child, limit)
}

// nodes counts the values in v, v included.
func nodes(v any) uint64 {
	n := uint64(1)
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			n += nodes(c)
		}
	case []any:
		for _, c := range v {
			n += nodes(c)
		}
	}
	return n
}

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
