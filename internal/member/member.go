// Package member keeps a tenant's team members' secrets: how their
// passwords are hashed and checked (password.go, with the decoy hash that
// keeps a sign-in's time from telling which addresses have accounts) and
// the one-time links that set them (token.go). Who a member is and what
// its role allows are sluice.Member and sluice.Role; the operations on
// members are package control's.
package member
