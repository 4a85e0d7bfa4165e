// Package notify tells an endpoint's owner about its trouble: the River
// worker that sends the email of a circuit opening or closing or of an
// endpoint Sluice disabled, the emails' text, and the SMTP client
// (SLUICE_SMTP_URL, SLUICE_SMTP_FROM). The owner is the consumer's alert
// address for a consumer's endpoint that has one, else the tenant's. The
// same transitions are posted as operational events (sluice.OpEvent) in
// the transaction that makes them (dispatch, store.InsertOpEvents).
package notify
