package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// captureProfile starts fetching a CPU profile of sluice (its pprof
// endpoint at debugURL) covering the next d, written to path. The returned
// func waits for it and says what happened.
func captureProfile(ctx context.Context, debugURL string, d time.Duration, path string) func() string {
	done := make(chan string, 1)
	go func() {
		done <- fetchProfile(ctx, debugURL, d, path)
	}()
	return func() string { return <-done }
}

func fetchProfile(ctx context.Context, debugURL string, d time.Duration, path string) string {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", debugURL, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "profile: " + err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "profile: " + err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("profile: %s answered %d", url, resp.StatusCode)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "profile: " + err.Error()
	}
	f, err := os.Create(path)
	if err != nil {
		return "profile: " + err.Error()
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return "profile: " + err.Error()
	}
	return fmt.Sprintf("CPU profile of sluice over the first %s of the scenario: `%s` (`go tool pprof -top %s`)", d, path, path)
}
