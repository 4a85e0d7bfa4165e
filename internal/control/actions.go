package control

// Action names one kind of change in the audit log ("endpoint.updated"),
// and what a role must allow to make it (sluice.Role.Allows). Every action
// is spelled here and nowhere else; the doors name them through these
// constants.
type Action string

// The changes.
const (
	APIKeyCreated Action = "api_key.created"
	APIKeyRevoked Action = "api_key.revoked"

	ConsumerCreated Action = "consumer.created"
	ConsumerUpdated Action = "consumer.updated"
	ConsumerDeleted Action = "consumer.deleted"

	PortalLinkCreated Action = "portal_link.created"
	PortalLinkRevoked Action = "portal_link.revoked"

	EventTypeCreated Action = "event_type.created"
	EventTypeUpdated Action = "event_type.updated"
	EventTypeDeleted Action = "event_type.deleted"

	EndpointCreated        Action = "endpoint.created"
	EndpointUpdated        Action = "endpoint.updated"
	EndpointDeleted        Action = "endpoint.deleted"
	EndpointSecretRevealed Action = "endpoint.secret_revealed"
	EndpointSecretRotated  Action = "endpoint.secret_rotated"
	EndpointTested         Action = "endpoint.tested"
	EndpointReplayed       Action = "endpoint.replayed"
	EndpointCircuitClosed  Action = "endpoint.circuit_closed"
	EndpointThrottleLifted Action = "endpoint.throttle_lifted"
	EndpointVerifyAsked    Action = "endpoint.verification_requested"

	SubscriptionCreated Action = "subscription.created"
	SubscriptionDeleted Action = "subscription.deleted"

	DeliveryReplayed Action = "delivery.replayed"
	DeliveryRetried  Action = "delivery.retried"

	MemberInvited Action = "member.invited"
	MemberUpdated Action = "member.updated"
	MemberRemoved Action = "member.removed"

	TenantRetentionUpdated Action = "tenant.retention_updated"
)

// The guarded reads: what not every role may see. They are never
// recorded; a role allows them as it allows a change.
const (
	ReadAuditLog Action = "audit_log.read"
	ReadMembers  Action = "member.read"
)

// Actions are every change and guarded read, for the tests that hold
// each role to them.
var Actions = []Action{
	APIKeyCreated,
	APIKeyRevoked,
	ConsumerCreated,
	ConsumerUpdated,
	ConsumerDeleted,
	PortalLinkCreated,
	PortalLinkRevoked,
	EventTypeCreated,
	EventTypeUpdated,
	EventTypeDeleted,
	EndpointCreated,
	EndpointUpdated,
	EndpointDeleted,
	EndpointSecretRevealed,
	EndpointSecretRotated,
	EndpointTested,
	EndpointReplayed,
	EndpointCircuitClosed,
	EndpointThrottleLifted,
	EndpointVerifyAsked,
	SubscriptionCreated,
	SubscriptionDeleted,
	DeliveryReplayed,
	DeliveryRetried,
	MemberInvited,
	MemberUpdated,
	TenantRetentionUpdated,
	MemberRemoved,
	ReadAuditLog,
	ReadMembers,
}
