package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/internal/sluice"
)

// tenantPatch is the body of PATCH /v1/tenant: a field left out stays as
// it is, null is the server's.
type tenantPatch struct {
	Retention     json.RawMessage `json:"retention"`
	DeadRetention json.RawMessage `json:"dead_retention"`
}

// tenantView is the tenant as GET /v1/tenant shows it.
type tenantView struct {
	ID                  string  `json:"id"`
	Name                string  `json:"name"`
	Retention           *string `json:"retention"`
	DeadRetention       *string `json:"dead_retention"`
	ServerRetention     string  `json:"server_retention"`
	ServerDeadRetention string  `json:"server_dead_retention"`
}

func viewTenant(s control.TenantSettings) tenantView {
	format := func(d *time.Duration) *string {
		if d == nil {
			return nil
		}
		s := control.FormatDuration(*d)
		return &s
	}
	return tenantView{ID: s.Tenant.ID.String(), Name: s.Tenant.Name,
		Retention: format(s.Retention), DeadRetention: format(s.DeadRetention),
		ServerRetention: control.FormatDuration(s.ServerRetention), ServerDeadRetention: control.FormatDuration(s.ServerDeadRetention)}
}

// getTenant is GET /v1/tenant: the tenant's own settings.
func (a *API) getTenant(w http.ResponseWriter, r *http.Request) error {
	s, err := a.ctl.TenantSettings(r.Context(), caller(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTenant(s))
	return nil
}

// updateTenant is PATCH /v1/tenant: sets the tenant's own retention.
func (a *API) updateTenant(w http.ResponseWriter, r *http.Request) error {
	var in tenantPatch
	if err := decodeJSON(w, r, &in, maxBodyBytes); err != nil {
		return err
	}
	v := &sluice.ValidationError{}
	change := control.RetentionChange{
		Retention:     durationChange(v, "retention", in.Retention),
		DeadRetention: durationChange(v, "dead_retention", in.DeadRetention),
	}
	if err := v.Err(); err != nil {
		return err
	}
	s, err := a.ctl.SetTenantRetention(r.Context(), caller(r), change)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTenant(s))
	return nil
}

// durationChange is a field of a PATCH that is a duration or null: unset
// when left out; anything but a string or null is added to v.
func durationChange(v *sluice.ValidationError, field string, raw json.RawMessage) control.DurationChange {
	if len(raw) == 0 {
		return control.DurationChange{}
	}
	if string(raw) == "null" {
		return control.DurationChange{Set: true}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		v.Add(field, "must be a Go duration such as 72h, or null")
		return control.DurationChange{}
	}
	return control.DurationChange{Set: true, Value: &s}
}
