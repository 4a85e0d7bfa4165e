// Package flow is the policy that decides when an endpoint may receive a
// request: its rate limit (a token bucket, paced at an adaptive rate's
// effective rate when the limit is adaptive), its throttle (the window a
// 429 opens) and its circuit breaker (consecutive failures). Each is pure
// arithmetic over a value the store keeps in Postgres, so every worker
// process shares it and a test needs no clock but the one it passes in.
//
// Dispatch applies the policy: it reads the state with an endpoint's
// deliveries, asks these functions what they allow, and writes the result
// back in the same transaction as the attempt it records.
package flow
