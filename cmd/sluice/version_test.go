package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluice-dev/sluice/internal/sluice"
)

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"version"}, &out, nil))
	require.Equal(t, sluice.VersionString()+"\n", out.String())
	require.True(t, strings.HasPrefix(out.String(), "dev") || sluice.Version != "", "a build without -X says it is a dev build")

	sluice.Version = "v9.9.9"
	t.Cleanup(func() { sluice.Version = "" })
	out.Reset()
	require.NoError(t, run(t.Context(), []string{"version"}, &out, nil))
	require.Equal(t, "v9.9.9\n", out.String(), "the version set at build time")
}

func TestLogFormat(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger, err := newLogger(&buf, "json")
	require.NoError(t, err)
	logger.Info("ready: listening", "url", "http://127.0.0.1:8080")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "ready: listening", line["msg"])

	buf.Reset()
	logger, err = newLogger(&buf, "")
	require.NoError(t, err)
	logger.Info("hello")
	require.Contains(t, buf.String(), "msg=hello", "text by default")

	_, err = newLogger(&buf, "xml")
	require.ErrorContains(t, err, "SLUICE_LOG_FORMAT")
}
