// Package testkit holds what tests need and the product never imports: a
// migrated database per test (pgtest), a store on it with two tenants
// (storetest), a loopback webhook receiver (receiver), an in-process
// SMTP server (smtpsink), an OTLP/HTTP trace receiver (otlpsink), a clock
// tests move by hand (fakeclock) and a TCP proxy that can hold the bytes
// to the database (tcpproxy). The three doubles keep what they have seen
// in a watch.List, which a test waits on for a condition instead of
// sleeping. The benchmark uses the receiver too, and the fault suite the
// proxy.
package testkit
