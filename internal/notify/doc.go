// Package notify tells an endpoint's owner about its trouble: the River
// worker that emails an operational event that calls for it
// (sluice.OpEvent.EmailsOwner: a circuit opening or closing, Sluice
// disabling the endpoint, a backlog), the emails' text, one template per
// event type, and the SMTP client (SLUICE_SMTP_URL, SLUICE_SMTP_FROM). The
// owner is the consumer's alert address for a consumer's endpoint that has
// one, else the tenant's: the same endpoints the event itself is routed
// to. Operational events are posted here (PostOpEvents), and the email is
// queued in the transaction that posts the event.
//
// It also emails a tenant's team members the links that set their
// passwords, an invitation or a reset (MemberMailWorker), over the same
// SMTP client.
package notify
