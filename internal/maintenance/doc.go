// Package maintenance keeps the database in shape while delivery runs:
// the week partitions of events, deliveries and attempts (created ahead,
// dropped when expired, at a cost that does not grow with their rows).
package maintenance
