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

// decodeBatch reads {"events": [...]} from the request one event at a
// time, with decodeJSON's rules (each event's text checked, unknown fields,
// repeated names and wrong types refused, nothing after the object), so
// that only the
// decoded events are ever held: not the body as well, nor a decoder's copy
// of it. It stops at the first event past maxBatchEvents.
func decodeBatch(w http.ResponseWriter, r *http.Request) (batchInput, error) {
	var in batchInput
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBatchBody))
	if err := expectDelim(dec, '{', "(body)", "an object"); err != nil {
		return in, err
	}
	for seen := false; dec.More(); seen = true {
		tok, err := dec.Token()
		if err != nil {
			return in, decodeProblem(err, maxBatchBody)
		}
		key, _ := tok.(string)
		v := &sluice.ValidationError{}
		switch {
		case key == "events" && seen:
			return in, &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest,
				Detail: "events is given twice; a name may appear only once in an object"}
		case strings.EqualFold(key, "events") && key != "events":
			v.Add(key, "is not a known field; names are case-sensitive: did you mean %q?", "events")
			return in, v
		case key != "events":
			v.Add(key, "is not a known field")
			return in, v
		}
		if in.Events, err = decodeEvents(dec); err != nil {
			return in, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return in, decodeProblem(err, maxBatchBody)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return in, &Problem{Type: typeMalformedJSON, Title: "Malformed JSON", Status: http.StatusBadRequest,
			Detail: "the body holds more than one JSON value"}
	}
	return in, checkFieldText(&in)
}

// decodeEvents reads the value of "events": null, or an array of events.
func decodeEvents(dec *json.Decoder) ([]eventInput, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return nil, decodeProblem(err, maxBatchBody)
	case tok == nil:
		return nil, nil
	case tok != json.Delim('['):
		return nil, notA("events", "an array")
	}
	events := []eventInput{}
	for i := 0; dec.More(); i++ {
		if i == maxBatchEvents {
			v := &sluice.ValidationError{}
			v.Add("events", "must hold at most %d events", maxBatchEvents)
			return nil, v
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, decodeProblem(err, maxBatchBody)
		}
		e, err := decodeEvent(raw, fmt.Sprintf("events[%d]", i))
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return nil, decodeProblem(err, maxBatchBody)
	}
	return events, nil
}

// decodeEvent decodes one event of a batch strictly, naming its fields
// under path.
func decodeEvent(raw json.RawMessage, path string) (eventInput, error) {
	var e eventInput
	if err := checkBodyText(raw); err != nil {
		return e, err
	}
	if bytes.TrimSpace(raw)[0] != '{' {
		return e, notA(path, "an object")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	err := d.Decode(&e)
	if err == nil {
		return e, checkNames(raw, eventInputType, path)
	}
	err = decodeProblem(err, maxBatchBody)
	var v *sluice.ValidationError
	if errors.As(err, &v) {
		for i := range v.Fields {
			v.Fields[i].Field = path + "." + v.Fields[i].Field
		}
	}
	return e, err
}

var eventInputType = reflect.TypeFor[eventInput]()

// expectDelim reads the token that opens a value at field, which must be
// delim, describing it as what when it is not.
func expectDelim(dec *json.Decoder, delim json.Delim, field, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return decodeProblem(err, maxBatchBody)
	}
	if tok != delim {
		return notA(field, what)
	}
	return nil
}

func notA(field, what string) error {
	v := &sluice.ValidationError{}
	v.Add(field, "must be %s", what)
	return v
}
