package app

import (
	"context"
	"log/slog"
)

// riverLogger is the logger River gets: its own Info lines (a "Producer job
// counts" line per queue every few seconds, maintenance runs) are routine
// and would make up most of the log, so only its warnings and errors pass.
func riverLogger(logger *slog.Logger) *slog.Logger {
	return slog.New(minLevel{Handler: logger.Handler(), min: slog.LevelWarn})
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

// Enabled implements slog.Handler.
func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

// WithAttrs implements slog.Handler.
func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

// WithGroup implements slog.Handler.
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
