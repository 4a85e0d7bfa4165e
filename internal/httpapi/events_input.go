package httpapi

// maxEventTypeLength bounds event type names and subscription patterns.
const maxEventTypeLength = 128
