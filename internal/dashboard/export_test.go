package dashboard

// AuditActions is the table of audited forms, for the test that walks the
// dashboard's routes against it.
var AuditActions = auditActions
