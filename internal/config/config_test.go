package config

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.Equal(t, DefaultAddr, c.Addr)
	require.Equal(t, "http://"+DefaultAddr, c.PublicURL)
	require.Len(t, c.RetrySchedule, 9, "nine intervals: ten attempts")
	require.Equal(t, []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour}, c.ThrottleSchedule)
	require.Equal(t, 10*time.Second, c.DeliveryTimeout)
	require.Equal(t, 5, c.CircuitThreshold)
	require.Equal(t, 14*24*time.Hour, c.Retention)
	require.Equal(t, 5*time.Second, c.DBTimeout)
	require.Equal(t, 120*time.Hour, c.DisableAfter)
	require.False(t, c.AllowPrivateTargets)
	require.Empty(t, c.DatabaseSessionURL, "everything on DATABASE_URL")

	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://pooler", "SLUICE_DATABASE_SESSION_URL": "postgres://db"}), false)
	require.NoError(t, err)
	require.Equal(t, "postgres://db", c.DatabaseSessionURL)
}

func TestDisableAfter(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_DISABLE_AFTER": "off"}), false)
	require.NoError(t, err)
	require.Negative(t, c.DisableAfter, "off: never")
	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_DISABLE_AFTER": "36h"}), false)
	require.NoError(t, err)
	require.Equal(t, 36*time.Hour, c.DisableAfter)
	_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_DISABLE_AFTER": "soon"}), false)
	require.ErrorContains(t, err, "SLUICE_DISABLE_AFTER")
}

func TestShortDurationsAndErrors(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{
		"DATABASE_URL":                 "postgres://x",
		"SLUICE_RETRY_SCHEDULE":        "100ms, 200ms",
		"SLUICE_CIRCUIT_PROBE":         "100ms",
		"SLUICE_ALLOW_PRIVATE_TARGETS": "true",
		"SLUICE_ENCRYPTION_KEY":        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	}), true)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, c.RetrySchedule)
	require.Equal(t, 100*time.Millisecond, c.CircuitProbe)
	require.True(t, c.AllowPrivateTargets)
	require.Len(t, c.EncryptionKey, 32)

	_, err = Parse(env(map[string]string{
		"SLUICE_RETRY_SCHEDULE":    "5s,soon",
		"SLUICE_CIRCUIT_THRESHOLD": "0",
		"SLUICE_DELIVERY_TIMEOUT":  "-1s",
	}), true)
	require.ErrorContains(t, err, "DATABASE_URL")
	require.ErrorContains(t, err, "SLUICE_RETRY_SCHEDULE")
	require.ErrorContains(t, err, "SLUICE_CIRCUIT_THRESHOLD")
	require.ErrorContains(t, err, "SLUICE_DELIVERY_TIMEOUT")
	require.ErrorContains(t, err, "SLUICE_ENCRYPTION_KEY")
}

func TestAPIRate(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.Equal(t, "100/s", c.APIRate.String())
	require.Equal(t, 200, c.APIRate.Burst())

	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_API_RATE": "6000/m"}), false)
	require.NoError(t, err)
	require.Equal(t, 200, c.APIRate.Burst())

	_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_API_RATE": "lots"}), false)
	require.ErrorContains(t, err, "SLUICE_API_RATE")
}

func TestOperatorToken(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.Empty(t, c.OperatorToken, "unset: no operator UI")

	token := "0123456789abcdef0123456789abcdef"
	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_OPERATOR_TOKEN": token}), false)
	require.NoError(t, err)
	require.Equal(t, token, c.OperatorToken)

	_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_OPERATOR_TOKEN": "hunter2"}), false)
	require.ErrorContains(t, err, "SLUICE_OPERATOR_TOKEN")
}

func TestEgressProxy(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.Nil(t, c.EgressProxy, "unset: attempts leave directly")

	for _, v := range []string{"http://10.0.0.5:3128", "http://proxy.internal:3128/", "http://u:p@127.0.0.1:8080"} {
		c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_EGRESS_PROXY": v}), false)
		require.NoError(t, err, v)
		require.Equal(t, "http", c.EgressProxy.Scheme, v)
		require.Empty(t, c.EgressProxy.Path, v)
	}
	for _, v := range []string{"proxy:3128", "https://proxy:3128", "socks5://proxy:1080", "http://proxy", "http://proxy:3128/x", "http://:3128", "http://u:hunter2@proxy:3128/x"} {
		_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_EGRESS_PROXY": v}), false)
		require.ErrorContains(t, err, "SLUICE_EGRESS_PROXY", v)
		require.NotContains(t, err.Error(), "hunter2", "the password is not shown")
	}
}

func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := Parse(env(map[string]string{"DATABASE_URL": "postgres://x"}), false)
	require.NoError(t, err)
	require.Empty(t, c.TrustedProxies, "unset: no forwarding header is believed")
	require.Empty(t, c.MetricsAddr, "unset: /metrics beside the probes")

	c, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x",
		"SLUICE_TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.7,fd00::/8 ,10.1.2.3/16,::ffff:172.16.0.0/108",
		"SLUICE_METRICS_ADDR":    "127.0.0.1:9090"}), false)
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("172.16.0.0/12"),
	}, c.TrustedProxies)
	require.Equal(t, "127.0.0.1:9090", c.MetricsAddr)

	for _, v := range []string{"10.0.0.0/33", "proxy.internal", "10.0.0.0/8,", "10.0.0.0/8;192.0.2.0/24", "fe80::1%eth0", "::ffff:10.0.0.0/64"} {
		_, err = Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_TRUSTED_PROXIES": v}), false)
		require.ErrorContains(t, err, "SLUICE_TRUSTED_PROXIES", v)
		require.ErrorContains(t, err, "is not a CIDR", v)
	}
}

func TestMaxPayload(t *testing.T) {
	t.Parallel()
	parse := func(v string) (Config, error) {
		return Parse(env(map[string]string{"DATABASE_URL": "postgres://x", "SLUICE_MAX_PAYLOAD": v}), false)
	}
	c, err := parse("")
	require.NoError(t, err)
	require.Equal(t, 256<<10, c.MaxPayload, "default: 256 KiB")
	for v, want := range map[string]int{"10MiB": 10 << 20, "1048576": 1 << 20, "512KiB": 512 << 10, "2048B": 2048, " 3 MiB ": 3 << 20} {
		c, err := parse(v)
		require.NoError(t, err, v)
		require.Equal(t, want, c.MaxPayload, v)
	}
	for _, v := range []string{"11MiB", "10485761", "1023", "0", "-1", "10MB", "ten", "1.5MiB", "99999999999999999999MiB"} {
		_, err := parse(v)
		require.ErrorContains(t, err, "SLUICE_MAX_PAYLOAD", v)
	}
	_, err = parse("20MiB")
	require.ErrorContains(t, err, `SLUICE_MAX_PAYLOAD: "20MiB" is outside 1KiB to 10MiB`)
}
