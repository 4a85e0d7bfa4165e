package endpointrules

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestPrivateTargetsRefusedByDefault(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"http://example.com/hook", // plain http
		"https://127.0.0.1/hook",
		"https://localhost:8443/hook",
		"https://api.localhost/hook",
		"https://10.1.2.3/hook",
		"https://192.168.0.1/hook",
		"https://[::1]/hook",
		"https://[fd00::1]/hook",
		"https://0.0.0.0/hook",
		"https://2130706433/hook",
		"https://100.64.0.1/hook",
	} {
		v := &sluice.ValidationError{}
		TargetURL(url, false, v)
		require.NotEmpty(t, v.Fields, "%s must be refused", url)
		v = &sluice.ValidationError{}
		TargetURL(url, true, v)
		require.Empty(t, v.Fields, "%s must be allowed with private targets on", url)
	}
	v := &sluice.ValidationError{}
	TargetURL("https://hooks.example.com/in?x=1", false, v)
	require.Empty(t, v.Fields)
}
