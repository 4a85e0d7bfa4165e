// Package notify tells an endpoint's owner about its trouble: the River
// worker that sends the email of a circuit opening or closing, the email's
// text, and the SMTP client (SLUICE_SMTP_URL, SLUICE_SMTP_FROM). The owner
// is the consumer's alert address for a consumer's endpoint that has one,
// else the tenant's.
package notify
