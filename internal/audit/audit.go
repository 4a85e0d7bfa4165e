// Package audit records who changed what: a middleware that runs each
// change a router names in one transaction with its audit entry
// (store.Change), so that the entry exists exactly when the change
// committed. Routes are named by a table of actions, not by a line in
// each handler; a request the table does not name passes through.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// Action names one kind of change, "endpoint.updated". An action ending in
// ".put" is a create-or-update: it is recorded as ".created" when the
// answer is 201 and ".updated" otherwise.
type Action string

// Changer runs a change and its entry in one transaction (store.Change).
type Changer interface {
	Change(ctx context.Context, tenant uuid.UUID, fn func(ctx context.Context) (*sluice.AuditEntry, error)) error
}

// Config is what Middleware needs from the router it audits.
type Config struct {
	// Actions names each audited route by method and pattern, relative
	// to Routes: "PATCH /endpoints/{id}".
	Actions map[string]Action
	// Routes matches a request to its route.
	Routes chi.Routes
	// Prefix is what the router is mounted under ("/v1"), cut from a
	// request's path before it is matched against Routes.
	Prefix string
	// Tenant and Actor say whose request it is (set by authentication,
	// which runs first).
	Tenant func(context.Context) uuid.UUID
	Actor  func(context.Context) sluice.Actor
	// Store runs the change.
	Store Changer
	// Failed answers a request whose change could not be committed.
	Failed func(w http.ResponseWriter, r *http.Request, err error)
	// Changed names the fields an update set, from its request and the
	// body the handler read (JSONFields, FormFields); nil records none.
	Changed func(r *http.Request, body []byte) []string
}

// Middleware runs every request that Actions names as a change: the
// handler's writes and the audit entry commit together when it succeeds
// (any answer under 400: a 2xx, or a form's redirect, except a redirect
// to the form's own path, which asks to confirm first), and roll back
// together otherwise. The answer is held until the
// commit, so a client never sees a success that did not commit.
func Middleware(cfg Config) func(http.Handler) http.Handler {
	// Only a method some action names needs its route matched: most
	// reads pass straight through.
	methods := map[string]bool{}
	for k := range cfg.Actions {
		method, _, _ := strings.Cut(k, " ")
		methods[method] = true
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !methods[r.Method] {
				next.ServeHTTP(w, r)
				return
			}
			route := chi.NewRouteContext()
			if !cfg.Routes.Match(route, r.Method, strings.TrimPrefix(r.URL.Path, cfg.Prefix)) {
				next.ServeHTTP(w, r)
				return
			}
			action, ok := cfg.Actions[r.Method+" "+route.RoutePattern()]
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			body := &teeBody{ReadCloser: r.Body}
			r.Body = body
			held := &heldResponse{header: w.Header(), status: http.StatusOK}
			named := new(string)
			err := cfg.Store.Change(r.Context(), cfg.Tenant(r.Context()), func(ctx context.Context) (*sluice.AuditEntry, error) {
				next.ServeHTTP(held, r.WithContext(context.WithValue(ctx, objectKey{}, named)))
				if held.status >= 400 || confirmFirst(r, held) {
					return nil, errNoChange
				}
				e := &sluice.AuditEntry{
					Actor:    cfg.Actor(r.Context()),
					Action:   string(resolve(action, held.status)),
					ObjectID: objectID(route, *named, held),
					SourceIP: sourceIP(r),
				}
				if cfg.Changed != nil {
					e.Changed = cfg.Changed(r, body.read.Bytes())
				}
				return e, nil
			})
			if errors.Is(err, errNoChange) {
				err = nil
			}
			if err != nil {
				held.discard()
				cfg.Failed(w, r, err)
				return
			}
			held.send(w)
		})
	}
}

// confirmFirst reports whether a form's answer sends the browser back to
// the form's own path: the confirmation page of a destructive action
// that was not confirmed yet, which changed nothing.
func confirmFirst(r *http.Request, held *heldResponse) bool {
	if held.status < 300 || held.status > 399 {
		return false
	}
	u, err := url.Parse(held.header.Get("Location"))
	return err == nil && u.Path == r.URL.Path
}

// errNoChange rolls back a change whose request failed.
var errNoChange = errors.New("audit: the request failed")

func resolve(a Action, status int) Action {
	noun, isPut := strings.CutSuffix(string(a), ".put")
	switch {
	case !isPut:
		return a
	case status == http.StatusCreated:
		return Action(noun + ".created")
	default:
		return Action(noun + ".updated")
	}
}

type objectKey struct{}

// Object names the object a change made, for a handler whose answer shows
// it in neither a JSON "id" nor a redirect (a page showing a new API key).
func Object(ctx context.Context, id string) {
	if named, ok := ctx.Value(objectKey{}).(*string); ok {
		*named = id
	}
}

// objectID is the id the route names (id, uid or name), or, for a create,
// the id the handler named (Object), or of what the answer shows, or of
// the page it redirects to.
func objectID(route *chi.Context, named string, held *heldResponse) *string {
	for _, key := range []string{"id", "uid", "name"} {
		if v := route.URLParam(key); v != "" {
			return &v
		}
	}
	if named != "" {
		return &named
	}
	var created struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(held.body.Bytes(), &created) == nil && created.ID != "" {
		return &created.ID
	}
	if loc := held.header.Get("Location"); loc != "" {
		if u, err := url.Parse(loc); err == nil {
			if last := path.Base(u.Path); last != "/" && last != "." {
				return &last
			}
		}
	}
	return nil
}

func sourceIP(r *http.Request) *string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if host == "" {
		return nil
	}
	return &host
}

// JSONFields names the fields an update (PATCH or PUT) set: the top-level
// names of its JSON body, sorted; never their values.
func JSONFields(r *http.Request, body []byte) []string {
	if r.Method != http.MethodPatch && r.Method != http.MethodPut {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(fields))
}

// FormFields returns a func naming the fields a form posted to a route
// ending in suffix ("/edit") set, leaving out those named in skip (a CSRF
// token); never their values.
func FormFields(suffix string, skip ...string) func(r *http.Request, body []byte) []string {
	return func(r *http.Request, body []byte) []string {
		if !strings.HasSuffix(r.URL.Path, suffix) {
			return nil
		}
		form := maps.Clone(r.PostForm) // parsed already by a CSRF check
		if form == nil {
			var err error
			if form, err = url.ParseQuery(string(body)); err != nil {
				return nil
			}
		}
		for _, k := range skip {
			delete(form, k)
		}
		return slices.Sorted(maps.Keys(form))
	}
}

// teeBody keeps what the handler read of the request body, so that the
// changed fields are named from the same bytes the handler decoded,
// within the limits the handler set.
type teeBody struct {
	io.ReadCloser
	read bytes.Buffer
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.read.Write(p[:n])
	return n, err //nolint:wrapcheck // a Reader passes its errors through
}

// heldResponse holds a handler's answer until its change has committed.
// Headers go straight to the real writer's map; only the status line and
// body wait.
type heldResponse struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }

func (h *heldResponse) WriteHeader(status int) {
	if !h.wrote {
		h.status, h.wrote = status, true
	}
}

func (h *heldResponse) Write(p []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(p) //nolint:wrapcheck // a bytes.Buffer never fails
}

func (h *heldResponse) send(w http.ResponseWriter) {
	w.WriteHeader(h.status)
	_, _ = w.Write(h.body.Bytes())
}

// discard forgets the answer and the headers it set, for the problem that
// replaces it.
func (h *heldResponse) discard() {
	for k := range h.header {
		if !strings.HasPrefix(k, "Ratelimit-") {
			delete(h.header, k)
		}
	}
}
