package control

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/sluice"
	"github.com/sluice-dev/sluice/internal/store"
)

// change runs fn as one change of the caller's tenant: it refuses a caller
// whose role does not allow act, then runs fn in one transaction (every
// store call made with the context fn receives joins it) and inserts the
// audit entry fn filled in (object id, changed fields; fn may rename the
// action, as a create-or-update does) before it commits. If fn fails,
// nothing is written, the entry neither.
func (c *Control) change(ctx context.Context, who Caller, act Action, fn func(ctx context.Context, e *sluice.AuditEntry) error) error {
	if err := who.may(act); err != nil {
		return err
	}
	return c.store.Change(ctx, who.Tenant, func(ctx context.Context) (*sluice.AuditEntry, error) {
		e := &sluice.AuditEntry{ID: store.NewID(), At: c.now().UTC().Truncate(time.Microsecond),
			Actor: who.Actor, Action: string(act), SourceIP: who.sourceIP()}
		if err := fn(ctx, e); err != nil {
			return nil, err
		}
		return e, nil
	})
}

// object is an id as an audit entry names it.
func object(id interface{ String() string }) *string {
	s := id.String()
	return &s
}
