// Package testkit holds what tests need and the product never imports: a
// migrated database per test (pgtest), a store on it with two tenants
// (storetest), a loopback webhook receiver (receiver), an in-process
// SMTP server (smtpsink) and a clock tests move by hand (fakeclock). The
// benchmark uses the receiver too.
package testkit
