package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/testkit/storetest"
)

func TestSignInLimitedPerAddress(t *testing.T) {
	t.Parallel()
	f := storetest.New(t)
	h := dashboard.New(f.Store, dashboard.Config{Key: dashboardKey, Jobs: f.Jobs}).Handler()
	signIn := func(addr, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"api_key": {key}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, signIn("198.51.100.7:4000", "sk_wrong").Code, "try %d", i)
	}
	w := signIn("198.51.100.7:4001", f.KeyA)
	require.Equal(t, http.StatusTooManyRequests, w.Code, "the 11th try in a minute, even with a good key")
	retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 6, retry, 1, "one try every 6 s comes back")
	require.Contains(t, w.Header().Get("Content-Type"), "text/html")
	require.Contains(t, w.Body.String(), "Too many sign-in attempts")

	// Another address, and another host's IPv6 /64, are not held back.
	require.Equal(t, http.StatusSeeOther, signIn("198.51.100.8:4000", f.KeyA).Code)
	for range 10 {
		signIn("[2001:db8:1:2::1]:4000", "sk_wrong")
	}
	require.Equal(t, http.StatusTooManyRequests, signIn("[2001:db8:1:2::ffff]:4000", "sk_wrong").Code, "one /64 is one client")
	require.Equal(t, http.StatusUnauthorized, signIn("[2001:db8:1:3::1]:4000", "sk_wrong").Code)
}
