package web

import (
	"strings"

	"github.com/google/uuid"

	"github.com/sluice-dev/sluice/internal/sluice"
)

// SectionAudit is the audit log page's nav section.
const SectionAudit = "audit"

// AuditView is a page of the audit log and the filter it was read with.
type AuditView struct {
	Entries []sluice.AuditEntry
	// The filter's fields as the form shows them; Since and Until as
	// datetime-local values (UTC).
	Action, ObjectID, ActorID, Since, Until string
	Error                                   string
	Older                                   string
	// ObjectLinks are the pages of the entries' objects, by entry id, for
	// those that have one.
	ObjectLinks map[uuid.UUID]string
}

// actorLabel is how an entry's actor reads: "API key ci", "portal cust_1".
func actorLabel(a sluice.Actor) string {
	switch a.Type {
	case sluice.ActorAPIKey:
		return "API key " + a.Name
	case sluice.ActorPortal:
		return "portal " + a.Name
	default:
		return a.Name
	}
}

// changedLabel lists an update's changed fields.
func changedLabel(fields []string) string { return strings.Join(fields, ", ") }
