package dispatch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// listenRetry is how long the listener waits before connecting again
// after its connection failed.
const listenRetry = time.Second

// listen carries wakes between processes: on a connection of its own it
// listens on wakeChannel, where Nudge names endpoints whose job is
// already live (possibly running here) and poll endpoints, and wakes
// those endpoints' runs and waiting poll reads registered here. It
// returns when ctx ends.
//
// A notification only hastens what would happen anyway: a lost one (while
// the connection is down) costs a lingering run the rest of its linger,
// and never a delivery (see Nudger).
func (n *Nudger) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.cfg.Logger.Warn("dispatch wake listener lost its connection; reconnecting", "err", err)
		retry, stop := n.cfg.Clock.After(listenRetry)
		select {
		case <-ctx.Done():
		case <-retry:
		}
		stop()
	}
}

func (n *Nudger) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, n.cfg.ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{wakeChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	n.setListening(true)
	defer n.setListening(false)
	for {
		msg, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		n.signal(parseWake(msg.Payload))
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
