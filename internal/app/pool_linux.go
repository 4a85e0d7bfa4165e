package app

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout returns a net.Dialer Control that sets TCP_USER_TIMEOUT
// on TCP connections (a Unix socket has none).
func setUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil
		}
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
		}); err != nil {
			return fmt.Errorf("reach socket: %w", err)
		}
		if serr != nil {
			return fmt.Errorf("set socket option: %w", serr)
		}
		return nil
	}
}
