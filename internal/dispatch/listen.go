package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/sluice-dev/sluice/internal/store"
)

// listenRetry is how long Listen waits before connecting again after its
// connection failed.
const listenRetry = time.Second

// Listen carries wake-ups between processes: on a connection of its own it
// listens on store.DispatchWakeChannel, where store.DispatchOrWake names
// endpoints whose dispatch job is already live (possibly running here),
// and signals those endpoints' runs registered in this Waker. It returns
// when ctx ends.
//
// A notification only hastens what would happen anyway: a lost one (while
// the connection is down) costs a lingering run the rest of its linger, and
// never a delivery (see Waker).
func (w *Waker) Listen(ctx context.Context, connConfig *pgx.ConnConfig, logger *slog.Logger) {
	for ctx.Err() == nil {
		err := w.listenOnce(ctx, connConfig)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("dispatch wake-ups: listener connection lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}

func (w *Waker) listenOnce(ctx context.Context, connConfig *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, connConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.DispatchWakeChannel}.Sanitize()); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		w.Wake(parseWake(n.Payload))
	}
}

// parseWake reads a notification's comma-separated endpoint ids, skipping
// anything that is not one.
func parseWake(payload string) []uuid.UUID {
	var ids []uuid.UUID
	for part := range strings.SplitSeq(payload, ",") {
		if id, err := uuid.Parse(part); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
