// Package eventschema validates posted events against the JSON Schemas
// (2020-12) of a tenant's event-type catalogue. Schemas are compiled once
// and cached per tenant; a tenant's cache entry is re-read from the store
// when it is older than a second (so a change made on another API process
// applies within one second) and dropped at once when this process changes
// the catalogue. Schemas cannot reach outside themselves: a $ref to any URL
// or file fails to compile.
package eventschema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-dev/sluice/internal/dbwait"
)

// MaxSchemaBytes bounds a schema's size, and so the cost of compiling it.
const MaxSchemaBytes = 64 << 10

// refresh is how long a tenant's compiled schemas are used before the
// store is asked again.
const refresh = time.Second

// Source is a named schema as stored, with when it last changed.
type Source struct {
	Name      string
	Schema    []byte
	UpdatedAt time.Time
}

// Loader reads the schemas of a tenant's event types that have one.
type Loader func(ctx context.Context, tenantID uuid.UUID) ([]Source, error)

// Compile compiles a JSON Schema (2020-12 unless its $schema says
// otherwise). The error says what is wrong with it.
func Compile(schema []byte) (*jsonschema.Schema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, fmt.Errorf("must be at most %d bytes", MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const url = "sluice:schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %v", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", oneLine(err.Error()))
	}
	return sch, nil
}

// noLoader refuses every external reference: schemas are self-contained.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, errors.New("schemas may not refer to other documents")
}

// Violation is why a value failed its schema: the first failing location
// (a JSON pointer into the value, "" for the value itself) and the message.
type Violation struct {
	Location string
	Message  string
}

// Check validates the JSON document doc against sch. It returns nil when
// doc is valid.
func Check(sch *jsonschema.Schema, doc []byte) *Violation {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Violation{Message: "is not JSON"}
	}
	err = sch.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error != nil && !strings.HasPrefix(u.Error.String(), "validation failed") {
			return &Violation{Location: u.InstanceLocation, Message: u.Error.String()}
		}
	}
	return &Violation{Message: oneLine(ve.Error())}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Cache holds the compiled schemas of the tenants that post events here.
type Cache struct {
	load Loader
	now  func() time.Time

	mu      sync.Mutex
	tenants map[uuid.UUID]*tenantSchemas
}

type tenantSchemas struct {
	// turn is held by the one load at a time per tenant; byName and
	// loadedAt are read and written under it.
	turn     chan struct{}
	loadedAt time.Time
	byName   map[string]compiled
}

type compiled struct {
	updatedAt time.Time
	schema    *jsonschema.Schema
}

// NewCache returns a cache that loads schemas with load.
func NewCache(load Loader) *Cache {
	return &Cache{load: load, now: time.Now, tenants: map[uuid.UUID]*tenantSchemas{}}
}

// Forget drops a tenant's schemas, so the next validation reloads them:
// call it after changing the tenant's catalogue.
func (c *Cache) Forget(tenantID uuid.UUID) {
	c.mu.Lock()
	delete(c.tenants, tenantID)
	c.mu.Unlock()
}

// Set is a tenant's compiled schemas at one moment; it never changes.
type Set struct {
	byName map[string]compiled
}

// For returns the schema of an event type, nil when it has none.
func (s Set) For(eventType string) *jsonschema.Schema {
	return s.byName[eventType].schema
}

// Schemas returns the tenant's compiled schemas, reloading them when they
// are older than a second. Only schemas that changed since the last load
// are compiled again.
func (c *Cache) Schemas(ctx context.Context, tenantID uuid.UUID) (Set, error) {
	c.mu.Lock()
	ts := c.tenants[tenantID]
	if ts == nil {
		ts = &tenantSchemas{turn: make(chan struct{}, 1)}
		c.tenants[tenantID] = ts
	}
	c.mu.Unlock()

	// Waiting for another request's load is waiting on the database: it
	// counts towards this request's bound (dbwait), and ends with it.
	done := dbwait.Wait(ctx)
	select {
	case ts.turn <- struct{}{}:
		done()
	case <-ctx.Done():
		done()
		return Set{}, fmt.Errorf("wait for the event schemas: %w", context.Cause(ctx))
	}
	defer func() { <-ts.turn }()
	if ts.byName == nil || c.now().Sub(ts.loadedAt) >= refresh {
		if err := c.reload(ctx, tenantID, ts); err != nil {
			return Set{}, err
		}
	}
	return Set{byName: ts.byName}, nil
}

func (c *Cache) reload(ctx context.Context, tenantID uuid.UUID, ts *tenantSchemas) error {
	loadedAt := c.now()
	sources, err := c.load(ctx, tenantID)
	if err != nil {
		return err
	}
	next := make(map[string]compiled, len(sources))
	for _, src := range sources {
		if old, ok := ts.byName[src.Name]; ok && old.updatedAt.Equal(src.UpdatedAt) {
			next[src.Name] = old
			continue
		}
		sch, err := Compile(src.Schema)
		if err != nil {
			continue // stored before a stricter rule: it validates nothing
		}
		next[src.Name] = compiled{updatedAt: src.UpdatedAt, schema: sch}
	}
	ts.byName, ts.loadedAt = next, loadedAt
	return nil
}
