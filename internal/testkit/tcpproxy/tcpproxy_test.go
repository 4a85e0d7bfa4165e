package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// echo serves a line echo on loopback.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestHoldReleaseReset(t *testing.T) {
	t.Parallel()
	p, err := tcpproxy.Start(echo(t))
	require.NoError(t, err)
	t.Cleanup(p.Close)

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	roundTrip := func(msg string) {
		t.Helper()
		_, err := c.Write([]byte(msg + "\n"))
		require.NoError(t, err)
		got, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, msg+"\n", got)
	}
	roundTrip("before")

	// Held: a line sent now waits at the proxy, and comes back only after
	// Release, on the same connection.
	p.Hold()
	_, err = c.Write([]byte("held\n"))
	require.NoError(t, err)
	got := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		got <- s
	}()
	require.Eventually(t, func() bool { return p.Held() == 1 }, 5*time.Second, time.Millisecond, "the line reaches the proxy")
	select {
	case s := <-got:
		t.Fatalf("read %q while held", s)
	default:
	}
	p.Release()
	require.Equal(t, "held\n", <-got)
	roundTrip("after")

	// Reset: the held connection is reset; a new one works.
	p.Hold()
	require.Equal(t, 1, p.Conns())
	p.Reset()
	_, err = r.ReadString('\n')
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "%v", err)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	c, r = c2, bufio.NewReader(c2)
	roundTrip("new")
}
