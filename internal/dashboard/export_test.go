package dashboard

import (
	"github.com/sluice-dev/sluice/internal/control"
)

// AuditActions is what each change the door offers records in the audit
// log, by method and route: the test that walks the door's routes holds
// the door to it, and the test that performs them to the log.
var AuditActions = map[string]control.Action{
	"POST /endpoints/{id}/delete":         control.EndpointDeleted,
	"POST /endpoints/{id}/replay":         control.EndpointReplayed,
	"POST /deliveries/{id}/replay":        control.DeliveryReplayed,
	"POST /deliveries/{id}/retry":         control.DeliveryRetried,
	"POST /api-keys":                      control.APIKeyCreated,
	"POST /api-keys/{id}/revoke":          control.APIKeyRevoked,
	"POST /consumers":                     control.ConsumerCreated,
	"POST /consumers/{uid}/edit":          control.ConsumerUpdated,
	"POST /consumers/{uid}/delete":        control.ConsumerDeleted,
	"POST /consumers/{uid}/portal":        control.PortalLinkCreated,
	"POST /consumers/{uid}/portal/revoke": control.PortalLinkRevoked,
	"POST /event-types":                   control.EventTypeCreated,
	"POST /event-types/{name}/edit":       control.EventTypeUpdated,
	"POST /event-types/{name}/delete":     control.EventTypeDeleted,
	"POST /members":                       control.MemberInvited,
	"POST /members/{id}/edit":             control.MemberUpdated,
	"POST /members/{id}/remove":           control.MemberRemoved,
	"POST /endpoints":                     control.EndpointCreated,
	"POST /endpoints/{id}/edit":           control.EndpointUpdated,
	"POST /endpoints/{id}/disable":        control.EndpointUpdated,
	"POST /endpoints/{id}/secret":         control.EndpointSecretRevealed,
	"POST /endpoints/{id}/secret/rotate":  control.EndpointSecretRotated,
	"POST /endpoints/{id}/test":           control.EndpointTested,
	"POST /endpoints/{id}/circuit/close":  control.EndpointCircuitClosed,
	"POST /endpoints/{id}/throttle/lift":  control.EndpointThrottleLifted,
	"POST /endpoints/{id}/verify":         control.EndpointVerifyAsked,
	"POST /settings":                      control.TenantRetentionUpdated,
}
