// Package eventschema validates posted events against the JSON Schemas
// (2020-12) of a tenant's event-type catalogue. Schemas are compiled once
// and cached per tenant; a tenant's cache entry is re-read from the store
// when it is older than a second (so a change made on another API process
// applies within one second) and dropped at once when this process changes
// the catalogue. Schemas cannot reach outside themselves: a $ref to any URL
// or file fails to compile.
//
// Validation is bounded twice (docs/input.md). A schema is refused when
// saved if its subschemas could be evaluated more than MaxEvaluations times
// at one place of an event (cost.go); and each payload is priced before it
// is validated, a request's payloads together at most MaxRequestCost; and
// validation runs under a deadline of CPU time (deadline.go), charged for
// the time it took where that was more than the price. Validation stops at
// the first failure, and says where in a few hundred bytes.
package eventschema

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sluice-dev/sluice/internal/dbwait"
	"github.com/sluice-dev/sluice/internal/textcheck"
)

// MaxSchemaBytes bounds a schema's size, and so the cost of compiling it.
const MaxSchemaBytes = 64 << 10

// MaxSchemaDepth bounds how deep a schema nests arrays and objects:
// compiling costs the square of it, and two levels per level of a payload
// (properties, then the member) describe the deepest payload with room to
// spare.
const MaxSchemaDepth = 160

// MaxSchemaObjects bounds the objects in a schema (its subschemas, about):
// the compiler's work grows with the square of their number.
const MaxSchemaObjects = 4096

// MaxDepth is how deep an event's payload may nest arrays and objects; the
// evaluation budget is checked for every place of a value this deep.
const MaxDepth = 64

// MaxEvaluations is the evaluation budget of a schema: how many times its
// subschemas may be evaluated at any one place of an event. A schema over
// it is refused when it is saved (Compile). Legitimate schemas, even large
// ones, stay well below; past it, a few levels of a subschema reached
// through two paths each (allOf of two $refs) double the cost per level.
const MaxEvaluations = 1000

// MaxRequestCost is what validating the payloads of one request may cost,
// in the units of Check's price: evaluations, with enum values compared
// and object members visited counted too. A unit is of the order of a
// microsecond of CPU. A request past it is refused before its payloads are validated; a
// single payload of the largest size against a plain schema costs a tenth
// of it.
const MaxRequestCost = 500_000

// detailCost is the most a failing payload may cost and still be
// validated a second time to say where it fails: the full error tree of a
// costlier one would be too large to build.
const detailCost = 10_000

// maxMessage bounds, in bytes, what a Violation says, and where.
const maxMessage = 300

// schemaURL and quickURL name the tenant's schema and a wrapper around it
// inside one compiler.
const (
	schemaURL = "sluice:schema.json"
	quickURL  = "sluice:quick.json"
)

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

// Schema is a compiled schema with its cost model.
type Schema struct {
	source []byte          // to compile more copies of the validator
	free   chan *validator // idle copies (deadline.go)
	cost   *model
}

// Compile compiles a JSON Schema (2020-12 unless its $schema says
// otherwise) and checks it against the evaluation budget. The error says
// what is wrong with it.
func Compile(schema []byte) (*Schema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, fmt.Errorf("must be at most %d bytes", MaxSchemaBytes)
	}
	if textcheck.Depth(schema) > MaxSchemaDepth {
		return nil, fmt.Errorf("must nest arrays and objects at most %d deep", MaxSchemaDepth)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("is not JSON: %w", err)
	}
	if objects(doc) > MaxSchemaObjects {
		return nil, fmt.Errorf("must hold at most %d objects (subschemas)", MaxSchemaObjects)
	}
	v, err := compileValidator(schema)
	if err != nil {
		return nil, err
	}
	cost, err := newModel(v.full, doc)
	if err != nil {
		return nil, err
	}
	s := &Schema{source: bytes.Clone(schema), free: make(chan *validator, freeValidators), cost: cost}
	s.put(v)
	return s, nil
}

// objects counts the JSON objects in v.
func objects(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n++
		for _, c := range v {
			n += objects(c)
		}
	case []any:
		for _, c := range v {
			n += objects(c)
		}
	}
	return n
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

// Budget is what validating one request's payloads may still cost.
type Budget struct {
	left, spent uint64
	clock       func() time.Duration // the thread's CPU time (threadCPU)
	pay         func(units uint64) error
}

// NewBudget returns a budget of units.
func NewBudget(units uint64) *Budget { return &Budget{left: units, clock: threadCPU} }

// PayFirst has Check call pay with each payload's price once it is within
// the budget and before it is validated: to charge the sender up front.
// An error from pay refuses the payload unvalidated, and Check returns it.
func (b *Budget) PayFirst(pay func(units uint64) error) *Budget {
	b.pay = pay
	return b
}

// Spent is what the checks against b have cost: their prices, or the
// time they took in units where that was more.
func (b *Budget) Spent() uint64 { return b.spent }

func (b *Budget) charge(units uint64) {
	b.spent = add(b.spent, units)
	b.left -= min(units, b.left)
}

// OverBudgetError refuses a payload whose validation would cost more than
// the request has left.
type OverBudgetError struct {
	Cost, Left uint64
}

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("would cost %s to validate against its schema, and a request may spend %d on validation "+
		"(%d were left): post fewer or smaller events at once", count(e.Cost), MaxRequestCost, e.Left)
}

// Check validates the JSON document doc against s. It prices doc first
// and refuses it (OverBudgetError) when that is more than b has left;
// otherwise it has the price paid (PayFirst), then validates doc under a
// deadline (deadline.go), refusing it
// when that passes (OverTimeError), charges b the price or the time taken,
// whichever is more, and returns nil when doc is valid, or the first
// failure found.
func (s *Schema) Check(doc []byte, b *Budget) (*Violation, error) {
	if textcheck.Depth(doc) > MaxDepth {
		return &Violation{Message: fmt.Sprintf("nests arrays and objects more than %d deep", MaxDepth)}, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &Violation{Message: "is not JSON"}, nil
	}
	price := s.cost.price(v, b.left)
	if price > b.left {
		return nil, &OverBudgetError{Cost: price, Left: b.left}
	}
	if b.pay != nil {
		if err := b.pay(price); err != nil {
			return nil, err
		}
	}
	limit := eventDeadline(price, b.left)
	val, err := s.take()
	if err != nil {
		return nil, err
	}
	defer s.put(val)
	charged := price
	var found *Violation
	took, stopped := val.timed(b.clock, limit, func() {
		if val.quick.Validate(v) == nil {
			return
		}
		if price > detailCost {
			found = &Violation{Message: "does not satisfy the schema (the payload is too large for Sluice to say where; validate it locally)"}
			return
		}
		charged = add(charged, price)
		var ve *jsonschema.ValidationError
		if !errors.As(val.full.Validate(v), &ve) {
			found = &Violation{Message: "does not satisfy the schema"} // cannot happen: quick said so
			return
		}
		found = firstFailure(ve)
	})
	b.charge(max(charged, toUnits(took)))
	if stopped {
		return nil, &OverTimeError{Limit: limit}
	}
	return found, nil
}

// firstFailure follows the first cause of the error tree down to a
// failing keyword: where it failed and why. At an anyOf or oneOf that no
// alternative matched it stops, naming the first alternative's failure.
func firstFailure(ve *jsonschema.ValidationError) *Violation {
	for len(ve.Causes) > 0 {
		switch ve.ErrorKind.(type) {
		case *kind.AnyOf, *kind.OneOf:
			why := firstFailure(ve.Causes[0])
			return &Violation{
				Location: pointer(ve.InstanceLocation),
				Message:  capText(describe(ve) + "; the first alternative: " + strings.TrimPrefix(why.Location+" ", " ") + why.Message),
			}
		}
		ve = ve.Causes[0]
	}
	return &Violation{Location: pointer(ve.InstanceLocation), Message: capText(describe(ve))}
}

var english = message.NewPrinter(language.English)

func describe(ve *jsonschema.ValidationError) string {
	return oneLine(ve.ErrorKind.LocalizedString(english))
}

// pointer writes a location as a JSON pointer, cut to maxMessage bytes.
func pointer(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/" + escapePointer(tok))
	}
	return capText(b.String())
}

// capText cuts s to maxMessage bytes, on a character boundary.
func capText(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
	schema    *Schema
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
func (s Set) For(eventType string) *Schema {
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
			// Stored before a stricter rule (the evaluation budget, say):
			// validating against it could cost without bound, so it
			// validates nothing.
			continue
		}
		next[src.Name] = compiled{updatedAt: src.UpdatedAt, schema: sch}
	}
	ts.byName, ts.loadedAt = next, loadedAt
	return nil
}
