package textcheck

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Fields walks a value decoded from JSON — structs, pointers, slices and
// maps down to strings — and calls bad for every string, or map key, that
// String refuses, with its path in JSON terms ("events[3].coalesce_key",
// "headers.X-Tag") and why. json.RawMessage values are left alone: they
// are kept as JSON text, checked by JSON.
func Fields(v any, bad func(path, msg string)) {
	walk(reflect.ValueOf(v), "", bad)
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

func walk(v reflect.Value, path string, bad func(path, msg string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), path, bad)
		}
	case reflect.String:
		if msg := String(v.String()); msg != "" {
			bad(path, msg)
		}
	case reflect.Struct:
		walkStruct(v, path, bad)
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessage {
			return
		}
		for i := range v.Len() {
			walk(v.Index(i), path+"["+strconv.Itoa(i)+"]", bad)
		}
	case reflect.Map:
		walkMap(v, path, bad)
	}
}

func walkStruct(v reflect.Value, path string, bad func(path, msg string)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "":
			name = f.Name
		}
		walk(v.Field(i), join(path, name), bad)
	}
}

func walkMap(v reflect.Value, path string, bad func(path, msg string)) {
	if v.Type().Key().Kind() != reflect.String {
		return
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		field := join(path, Printable(k.String()))
		if msg := String(k.String()); msg != "" {
			bad(field, "name "+msg)
			continue
		}
		walk(v.MapIndex(k), field, bad)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
