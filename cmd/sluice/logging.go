package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger returns the process's logger in the format SLUICE_LOG_FORMAT
// names: "text" (the default) or "json".
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	default:
		return nil, fmt.Errorf("SLUICE_LOG_FORMAT: %q is neither text nor json", format)
	}
}
