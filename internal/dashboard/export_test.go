package dashboard

import (
	"maps"

	"github.com/sluice-dev/sluice/internal/audit"
)

// AuditActions is the table of audited forms, for the test that walks the
// dashboard's routes against it.
var AuditActions = func() map[string]audit.Action {
	all := maps.Clone(auditActions)
	for k, a := range controlled {
		all[k] = audit.Action(a)
	}
	return all
}()
