package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// maxBodyBytes bounds every request body; event payloads have their own,
// smaller limit checked after decoding.
const maxBodyBytes = 8 << 20

// decodeJSON reads the request body into dst strictly: text that is not
// UTF-8, unknown fields, wrong types, trailing data and oversize bodies are
// all client errors, each with a message that names what is wrong; so are
// a name given twice in one object, a field name in the wrong case
// (checkNames) and decoded strings that Postgres could not store
// (checkFieldText).
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return decodeProblem(err, limit)
	}
	if err := checkBodyText(raw); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeProblem(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest,
			Detail: "the body holds more than one JSON value"}
	}
	if err := checkNames(raw, reflect.TypeOf(dst), ""); err != nil {
		return err
	}
	return checkFieldText(dst)
}

func decodeProblem(err error, limit int64) error {
	var (
		syntax    *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		invalid   *sluice.ValidationError
		tooLarge  *http.MaxBytesError
		malformed = func(detail string) error {
			return &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest, Detail: detail}
		}
	)
	switch {
	case errors.As(err, &invalid): // from a type's own UnmarshalJSON
		return invalid
	case errors.As(err, &tooLarge):
		return &Problem{Type: typeTooLarge, Title: "Payload too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("the request body exceeds %d bytes", limit)}
	case errors.Is(err, io.EOF):
		return malformed("the request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("the request body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return malformed(fmt.Sprintf("invalid JSON at byte %d: %s", syntax.Offset, syntax.Error()))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		v := &sluice.ValidationError{}
		v.Add(field, "must be %s, not %s", jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		return v
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		v := &sluice.ValidationError{}
		v.Add(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field")
		return v
	default:
		return malformed(err.Error())
	}
}

// jsonTypeName names a Go kind the way a JSON user thinks of it.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return "another type"
	}
}
