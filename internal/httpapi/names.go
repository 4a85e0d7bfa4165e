package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// checkNames refuses what encoding/json lets through in a body it has just
// decoded into a value of type t: the same name twice in one object, where
// the last would win here and the first in some receivers (anywhere in the
// body, payloads included, since a payload is delivered byte for byte), and
// a field name that matches one of t's fields only when case is ignored.
// b must be valid JSON. Names are compared after unescaping, so "\u0061"
// repeats "a". prefix is the path of b in the request ("events[3]"), or "".
func checkNames(b []byte, t reflect.Type, prefix string) error {
	s := nameScanner{stack: make([]nameFrame, 0, 8)}
	return s.scan(b, t, prefix)
}

// nameFrame is one open object or array.
type nameFrame struct {
	object bool
	typ    reflect.Type // what it decodes into; nil when free-form
	key    string       // the current member's name (objects)
	index  int          // the current element (arrays)
	keys   []string     // the names seen so far (objects), until byName
	byName map[string]struct{}
}

type nameScanner struct {
	stack  []nameFrame
	prefix string
}

func (s *nameScanner) scan(b []byte, t reflect.Type, prefix string) error {
	s.prefix = prefix
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := stringEnd(b, i)
			if expectKey {
				if err := s.member(b[i : end+1]); err != nil {
					return err
				}
				expectKey = false
			}
			i = end
		case '{':
			s.stack = append(s.stack, nameFrame{object: true, typ: s.childType(t)})
			expectKey = true
		case '[':
			s.stack = append(s.stack, nameFrame{typ: s.childType(t)})
		case '}', ']':
			s.stack = s.stack[:len(s.stack)-1]
		case ',':
			top := &s.stack[len(s.stack)-1]
			if top.object {
				expectKey = true
			} else {
				top.index++
			}
		}
	}
	return nil
}

// member checks the name (a JSON string, quotes included) of the next
// member of the innermost object.
func (s *nameScanner) member(quoted []byte) error {
	top := &s.stack[len(s.stack)-1]
	var name string
	if bytes.IndexByte(quoted, '\\') < 0 {
		name = string(quoted[1 : len(quoted)-1])
	} else if err := json.Unmarshal(quoted, &name); err != nil {
		return err //nolint:wrapcheck // decodeJSON reads encoding/json's own errors to say what is wrong; cannot happen: the body was decoded
	}
	top.key = name
	if top.seen(name) {
		return &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("%s is given twice; a name may appear only once in an object", s.path())}
	}
	if f := fieldsOf(top.typ); f != nil {
		if _, ok := f.exact[name]; !ok {
			if want := f.fold(name); want != "" {
				v := &sluice.ValidationError{}
				v.Add(s.path(), "is not a known field; names are case-sensitive: did you mean %q?", want)
				return v
			}
		}
	}
	return nil
}

// seen records name, reporting whether the object already had it.
func (f *nameFrame) seen(name string) bool {
	const linear = 16 // below this many names a slice beats a map
	if f.byName == nil {
		for _, k := range f.keys {
			if k == name {
				return true
			}
		}
		if f.keys = append(f.keys, name); len(f.keys) > linear {
			f.byName = make(map[string]struct{}, 2*linear)
			for _, k := range f.keys {
				f.byName[k] = struct{}{}
			}
			f.keys = nil
		}
		return false
	}
	if _, ok := f.byName[name]; ok {
		return true
	}
	f.byName[name] = struct{}{}
	return false
}

// childType is the type a value opening now decodes into: root for the
// body itself, else what the innermost object's member or array's element
// decodes into.
func (s *nameScanner) childType(root reflect.Type) reflect.Type {
	if len(s.stack) == 0 {
		return deref(root)
	}
	top := s.stack[len(s.stack)-1]
	if top.typ == nil {
		return nil
	}
	switch top.typ.Kind() {
	case reflect.Struct:
		if f := fieldsOf(top.typ); f != nil {
			return deref(f.exact[top.key])
		}
	case reflect.Map, reflect.Slice, reflect.Array:
		return deref(top.typ.Elem())
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// deref is the type a JSON value decodes into through t's pointers; nil
// when the value is kept as it is (json.RawMessage, any).
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t == rawMessageType || t.Kind() == reflect.Interface {
		return nil
	}
	return t
}

// path names the current member in the style of validation errors:
// "events[3].payload.customer.id".
func (s *nameScanner) path() string {
	var b strings.Builder
	b.WriteString(s.prefix)
	for i, f := range s.stack {
		switch {
		case f.object:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case i < len(s.stack)-1:
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return b.String()
}

// stringEnd is the index of the quote that closes the JSON string opening
// at b[start].
func stringEnd(b []byte, start int) int {
	for i := start + 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b) - 1
}

// structFields are the JSON names of a struct's fields, with the types
// their values decode into.
type structFields struct {
	exact map[string]reflect.Type
	names []string
}

// fold is the field that encoding/json would match name to when case is
// ignored (with its own folding: "ſ" is an "s"), or "".
func (f *structFields) fold(name string) string {
	for _, n := range f.names {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf returns t's JSON field names, nil when t is not a struct.
func fieldsOf(t reflect.Type) *structFields {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{exact: map[string]reflect.Type{}}
	addFields(f, t)
	fieldCache.Store(t, f)
	return f
}

func addFields(f *structFields, t reflect.Type) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case sf.Anonymous && name == "" && deref(sf.Type) != nil && deref(sf.Type).Kind() == reflect.Struct:
			addFields(f, deref(sf.Type)) // promoted fields
			continue
		case !sf.IsExported():
			continue
		case name == "":
			name = sf.Name
		}
		f.exact[name] = sf.Type
		f.names = append(f.names, name)
	}
}
