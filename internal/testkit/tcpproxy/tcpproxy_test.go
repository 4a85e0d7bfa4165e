package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/testkit/tcpproxy"
)

// echo serves a line echo on loopback and counts the connections it
// accepted.
func echo(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), &accepted
}

func TestHoldReleaseReset(t *testing.T) {
	t.Parallel()
	target, accepted := echo(t)
	p, err := tcpproxy.Start(target)
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

	// A connection opened while held reaches nothing until Release.
	p.Hold()
	late, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer late.Close()
	require.Eventually(t, func() bool { return p.Held() == 1 }, 5*time.Second, time.Millisecond, "the proxy holds it")
	require.EqualValues(t, 1, accepted.Load(), "the target has seen only the first connection")

	// Reset: both held connections are reset; a new one works.
	require.Equal(t, 2, p.Conns())
	p.Reset()
	_, err = late.Read(make([]byte, 1))
	require.Error(t, err, "the late connection is reset too")
	_, err = r.ReadString('\n')
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "%v", err)
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	c, r = c2, bufio.NewReader(c2)
	roundTrip("new")
}
