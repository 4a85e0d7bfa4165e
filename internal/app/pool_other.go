//go:build !linux

package app

import (
	"syscall"
	"time"
)

// setUserTimeout sets nothing where TCP_USER_TIMEOUT does not exist; the
// keepalives and the request bounds still hold.
func setUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
