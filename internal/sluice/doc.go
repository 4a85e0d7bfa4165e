// Package sluice holds the domain types and sentinel errors shared by every
// other package: tenants, endpoints, subscriptions, events and deliveries as
// the API shows them. It imports nothing of the project, so any package may
// import it without cycles.
package sluice
