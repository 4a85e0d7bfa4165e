package dashboard

import (
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/control"
	"github.com/sluice-dev/sluice/web"
)

// The tenant's settings page: its own retention, which every member
// reads and owners and admins set (the API's PATCH /v1/tenant).

// showSettings is GET /settings.
func (d *Dashboard) showSettings(w http.ResponseWriter, r *http.Request) error {
	s, err := d.ctl.TenantSettings(r.Context(), caller(r))
	if err != nil {
		return err
	}
	v := settingsView(s)
	if r.URL.Query().Get("done") == "saved" {
		v.Flash = "Retention saved."
	}
	return d.render(w, r, http.StatusOK, web.SettingsPage(chrome(r, web.SectionSettings), v))
}

// setRetention is POST /settings: sets both retentions, an empty field
// the server's.
func (d *Dashboard) setRetention(w http.ResponseWriter, r *http.Request) error {
	field := func(name string) control.DurationChange {
		s := strings.TrimSpace(r.PostForm.Get(name))
		if s == "" {
			return control.DurationChange{Set: true}
		}
		return control.DurationChange{Set: true, Value: &s}
	}
	_, err := d.ctl.SetTenantRetention(r.Context(), caller(r), control.RetentionChange{Retention: field("retention"), DeadRetention: field("dead_retention")})
	if invalid(err) {
		s, rerr := d.ctl.TenantSettings(r.Context(), caller(r))
		if rerr != nil {
			return rerr
		}
		v := settingsView(s)
		v.Retention, v.DeadRetention = r.PostForm.Get("retention"), r.PostForm.Get("dead_retention")
		v.Error = fieldErrors(err)
		return d.render(w, r, http.StatusUnprocessableEntity, web.SettingsPage(chrome(r, web.SectionSettings), v))
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/settings?done=saved", http.StatusSeeOther)
	return nil
}

func settingsView(s control.TenantSettings) web.SettingsView {
	format := func(d *time.Duration) string {
		if d == nil {
			return ""
		}
		return control.FormatDuration(*d)
	}
	return web.SettingsView{Retention: format(s.Retention), DeadRetention: format(s.DeadRetention),
		ServerRetention: control.FormatDuration(s.ServerRetention), ServerDeadRetention: control.FormatDuration(s.ServerDeadRetention)}
}
