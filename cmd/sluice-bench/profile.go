package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/pprof/profile"
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
	if _, err := fetchCPUProfile(ctx, debugURL, d, path); err != nil {
		return "profile: " + err.Error()
	}
	return fmt.Sprintf("CPU profile of sluice over the first %s of the scenario: `%s` (`go tool pprof -top %s`)", d, path, path)
}

// fetchCPUProfile is a CPU profile of sluice (its pprof endpoint at
// debugURL) over the next d, kept at path.
func fetchCPUProfile(ctx context.Context, debugURL string, d time.Duration, path string) (*profile.Profile, error) {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", debugURL, int(d.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("profile request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d: %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("keep the profile: %w", err)
	}
	if err := os.WriteFile(path, body, 0o644); err != nil {
		return nil, fmt.Errorf("keep the profile: %w", err)
	}
	p, err := profile.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse the profile: %w", err)
	}
	return p, nil
}
