package send

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A message without TLS is sent with the shared client: no endpoint
// client is built or kept.
func TestPlainSendUsesTheSharedClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	s := New(Config{AllowPrivate: true, Timeout: 5 * time.Second})
	m := Message{URL: srv.URL + "/hook", ID: "evt_1", Body: []byte(`{}`)}
	require.True(t, s.Send(context.Background(), m).Delivered())
	s.tls.mu.Lock()
	defer s.tls.mu.Unlock()
	require.Empty(t, s.tls.m)
}
