package client

import (
	"context"
	"net/http"
)

// WithAPIKey sends key as the bearer token of every request, the way every
// /v1 operation authenticates.
func WithAPIKey(key string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+key)
		return nil
	})
}
