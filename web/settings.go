package web

// SectionSettings is the nav section of the tenant's settings page.
const SectionSettings = "settings"

// SettingsView is the tenant's settings page: its own retention, empty
// for the server's, and the server's beside it.
type SettingsView struct {
	Retention, DeadRetention             string
	ServerRetention, ServerDeadRetention string
	Flash                                string
	// Error says why the form was refused; the fields refill it.
	Error string
}
