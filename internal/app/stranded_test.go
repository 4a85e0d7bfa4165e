package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/app"
	"github.com/sluice-dev/sluice/internal/testkit/pgtest"
)

// TestIsStranded: a primary is left behind only when its commits wait for
// a synchronous standby, none is connected, and it was neither promoted
// nor started within the grace; a standby never is (target_session_attrs
// refuses it). The grace's edge goes to the server.
func TestIsStranded(t *testing.T) {
	t.Parallel()
	const grace = app.PromotedGrace
	// waiting is a primary long up, never promoted, whose commits wait
	// for a standby that is not there: the case the check is for.
	waiting := app.LeaderState{WaitsForStandby: true, Uptime: time.Hour}
	with := func(f func(*app.LeaderState)) app.LeaderState {
		s := waiting
		f(&s)
		return s
	}
	cases := []struct {
		name  string
		state app.LeaderState
		left  bool
	}{
		{"waits for a standby, none connected, never promoted", waiting, true},
		{"a standby connected", with(func(s *app.LeaderState) { s.StandbyConnected = true }), false},
		{"commits wait for no standby", with(func(s *app.LeaderState) { s.WaitsForStandby = false }), false},
		{"in recovery", with(func(s *app.LeaderState) { s.InRecovery = true }), false},
		{"a standby in recovery with its own cascade", app.LeaderState{InRecovery: true, StandbyConnected: true, Uptime: time.Hour}, false},
		{"promoted just now", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, 0 }), false},
		{"promoted a second ago", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, time.Second }), false},
		{"promoted exactly the grace ago", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, grace }), false},
		{"promoted just past the grace", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, grace+time.Microsecond }), true},
		{"promoted long ago", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, time.Hour }), true},
		{"promoted long ago, a standby connected", with(func(s *app.LeaderState) {
			s.Replayed, s.SinceReplay, s.StandbyConnected = true, time.Hour, true
		}), false},
		{"never promoted, started just now", with(func(s *app.LeaderState) { s.Uptime = 0 }), false},
		{"never promoted, started exactly the grace ago", with(func(s *app.LeaderState) { s.Uptime = grace }), false},
		{"never promoted, started just past the grace", with(func(s *app.LeaderState) { s.Uptime = grace + time.Microsecond }), true},
		{"promoted long ago, restarted just now", with(func(s *app.LeaderState) {
			s.Replayed, s.SinceReplay, s.Uptime = true, time.Hour, time.Second
		}), false},
		{"replayed in the future (clock stepped back)", with(func(s *app.LeaderState) { s.Replayed, s.SinceReplay = true, -time.Minute }), false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.left, app.IsStranded(tc.state, grace), tc.name)
	}
}

// TestParseLeaderState reads the check's row as the server sends it
// (text), NULL for a server never in recovery since it started, and
// refuses a row it cannot read rather than guess.
func TestParseLeaderState(t *testing.T) {
	t.Parallel()
	s, err := app.ParseLeaderState([][]byte{[]byte("f"), []byte("t"), []byte("f"), []byte("12.5"), []byte("3600.000001")})
	require.NoError(t, err)
	require.Equal(t, app.LeaderState{WaitsForStandby: true, Replayed: true, SinceReplay: 12500 * time.Millisecond, Uptime: 3600*time.Second + time.Microsecond}, s)

	s, err = app.ParseLeaderState([][]byte{[]byte("t"), []byte("f"), []byte("t"), nil, []byte("2")})
	require.NoError(t, err)
	require.Equal(t, app.LeaderState{InRecovery: true, StandbyConnected: true, Uptime: 2 * time.Second}, s)

	_, err = app.ParseLeaderState([][]byte{[]byte("f"), []byte("t"), []byte("f"), nil})
	require.Error(t, err, "a column short")
	_, err = app.ParseLeaderState([][]byte{[]byte("f"), []byte("t"), []byte("f"), []byte("soon"), []byte("2")})
	require.Error(t, err, "not a number")
}

// TestStrandedOnAServer: the check's row, read from a real server (a
// primary with no synchronous standby names, never in recovery), parses,
// and the server is not left behind.
func TestStrandedOnAServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	left, err := app.StrandedByReplication(ctx, conn.PgConn())
	require.NoError(t, err)
	require.False(t, left, "a primary whose commits wait for no standby")

}
