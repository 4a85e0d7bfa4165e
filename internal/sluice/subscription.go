package sluice

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Subscription routes events whose type matches one of EventTypes, and
// whose payload matches Filter when there is one (internal/filter), to an
// endpoint.
type Subscription struct {
	ID         uuid.UUID       `json:"id"`
	TenantID   uuid.UUID       `json:"-"`
	EndpointID uuid.UUID       `json:"endpoint_id"`
	EventTypes []string        `json:"event_types"`
	Filter     json.RawMessage `json:"filter"` // null when there is none
	CreatedAt  time.Time       `json:"created_at"`
}

// MatchEventType reports whether eventType matches pattern: "*" matches
// every type but Sluice's own (IsReservedType), "video.*" every type that
// starts with "video.", and anything else only itself.
func MatchEventType(pattern, eventType string) bool {
	switch {
	case pattern == "*":
		return !IsReservedType(eventType)
	case strings.HasSuffix(pattern, ".*"):
		return strings.HasPrefix(eventType, pattern[:len(pattern)-1])
	default:
		return pattern == eventType
	}
}

// CandidatePatterns returns every pattern that could match eventType: the
// type itself, "*" (unless the type is Sluice's own), and "prefix.*" for
// each dotted prefix of it (for "a.b.c": "a.b.c", "*", "a.*", "a.b.*"). A
// subscription matches the type only if it holds one of them.
func CandidatePatterns(eventType string) []string {
	out := []string{eventType, "*"}
	if IsReservedType(eventType) {
		out = out[:1]
	}
	for i := range len(eventType) {
		if eventType[i] == '.' {
			out = append(out, eventType[:i+1]+"*")
		}
	}
	return out
}
