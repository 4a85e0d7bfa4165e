package eventschema

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// The automaton's states: closures of schemas applied in place, interned,
// and the steps between them, explored within MaxDepth at Compile.

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
	own = cost{evals: own.evals / g, base: own.base / g, perKey: own.perKey / g, perByte: own.perByte / g, keyByte: own.keyByte / g}
	return m.intern(entries, own), g, nil
}

// cost is what schemas evaluated at one place cost there.
type cost struct {
	evals  uint64 // evaluations
	base   uint64 // evaluations with enum values
	perKey uint64 // per member of an object: evaluations with patterns
	// perByte and keyByte are the steps per byte of a string value and
	// of a member's name (textWork).
	perByte, keyByte uint64
}

// plus adds c evaluations of n.
func (o cost) plus(c uint64, n *gnode) cost {
	return cost{evals: add(o.evals, c), base: add(o.base, mul(c, n.weight)), perKey: add(o.perKey, mul(c, n.perKey)),
		perByte: add(o.perByte, mul(c, n.perByte)), keyByte: add(o.keyByte, mul(c, n.keyByte))}
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
	buf = binary.AppendUvarint(buf, own.perByte)
	buf = binary.AppendUvarint(buf, own.keyByte)
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
	st.evals, st.base, st.perKey, st.perByte, st.keyByte = own.evals, own.base, own.perKey, own.perByte, own.keyByte
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
