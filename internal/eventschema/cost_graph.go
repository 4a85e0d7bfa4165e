package eventschema

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The schema graph: every schema a root reaches, and in what order its
// nodes are explored.

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
		patterns = append(patterns, pattern{re: ungated(re), node: sub(t)})
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
	n.perByte = textWork(s)
	for _, p := range patterns {
		n.keyByte = add(n.keyByte, regexpSteps(p.re.String()))
	}
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
