// Package controltest builds the control layer a door's tests stand on,
// as app wires it for a process.
package controltest

import (
	"time"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/dispatch"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/internal/store"
)

// Options are the settings a test gives; zero values are control's
// defaults.
type Options struct {
	Nudger              dispatch.TxNudger
	Poll                *poll.Reader
	AllowPrivateTargets bool
	PublicURL           string
	PortalKey           []byte
	Now                 func() time.Time
	MemberMail          control.MemberMail
}

// New returns a Control on st with o.
func New(st *store.Store, o Options) *control.Control {
	return control.New(control.Config{
		Store: st, Nudger: o.Nudger, Poll: o.Poll,
		AllowPrivateTargets: o.AllowPrivateTargets, PublicURL: o.PublicURL, PortalKey: o.PortalKey, Now: o.Now,
		MemberMail: o.MemberMail,
	})
}
