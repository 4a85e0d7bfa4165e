package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// pathID parses the {id} path parameter; a malformed id names no object, so
// it answers 404 like an unknown one, with a message saying why.
func pathID(r *http.Request, kind string) (uuid.UUID, error) {
	raw := chi.URLParam(r, "id")
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, notFoundProblem(fmt.Sprintf("%q is not a valid %s id", raw, kind))
	}
	return id, nil
}

// queryID parses an optional id filter from the query string.
func queryID(r *http.Request, name string, v *sluice.ValidationError) *uuid.UUID {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return nil
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		v.Add(name, "%q is not a valid id", raw)
		return nil
	}
	return &id
}

// queryTime reads an RFC 3339 time from the query parameter name, or
// records in v why it cannot; nil when the parameter is absent.
func queryTime(q url.Values, name string, v *sluice.ValidationError) *time.Time {
	raw := q.Get(name)
	if raw == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		v.Add(name, "%q is not an RFC 3339 time such as 2030-01-31T14:05:00Z", raw)
		return nil
	}
	return &t
}

// pageParams reads ?limit= and ?cursor= into v's failures or a PageParams.
func pageParams(r *http.Request, v *sluice.ValidationError) sluice.PageParams {
	p := sluice.PageParams{Limit: sluice.DefaultPageLimit}
	q := r.URL.Query()
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > sluice.MaxPageLimit {
			v.Add("limit", "must be an integer from 1 to %d", sluice.MaxPageLimit)
		}
		p.Limit = n
	}
	if raw := q.Get("cursor"); raw != "" {
		b, err := base64.RawURLEncoding.DecodeString(raw)
		id, idErr := uuid.FromBytes(b)
		if err != nil || idErr != nil {
			v.Add("cursor", "is not a cursor this API returned")
		} else {
			p.After = &id
		}
	}
	return p
}

// listBody is the JSON of one page of a list.
type listBody[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

func writePage[T any](w http.ResponseWriter, p sluice.Page[T]) {
	body := listBody[T]{Data: p.Items}
	if p.Next != nil {
		c := base64.RawURLEncoding.EncodeToString(p.Next[:])
		body.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, body)
}
