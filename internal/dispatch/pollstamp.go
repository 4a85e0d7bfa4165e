package dispatch

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/sluice-dev/sluice/internal/store/dbq"
)

// Poll stamps let a poll reader (package poll) keep what it looked up of a
// poll endpoint from one read to the next instead of asking the database
// each time. A stamp names the last thing this process heard that could
// make a look-up of the endpoint wrong:
//
//   - a nudge of the endpoint: deliveries to it committed (Nudge, and
//     Dispatch at the commit of a replay or test event);
//   - a notification of a change to it, sent at the change's commit by the
//     triggers of 00032_poll_changes.sql: a new secret (its poll URL's
//     token changes), its deletion, its tenant disabled or enabled;
//   - a gap: the listener lost or regained its connection, so a
//     notification may have gone unheard, or this process forgot which
//     endpoints it watches.
//
// Whatever was looked up after the stamp was read is current for as long
// as the stamp stays the same. A process that is not listening hears no
// other process's changes, so it gives no stamp at all.
//
// The fields below are guarded by Nudger.mu.
type pollStamps struct {
	seq       uint64               // counts everything stamped
	gap       uint64               // seq at the last gap
	listening bool                 // the listener's LISTEN is in effect
	watched   map[uuid.UUID]uint64 // endpoint → seq at its last change
}

// maxWatched bounds the poll endpoints whose stamps the Nudger keeps; past
// it, it forgets them all (a gap).
const maxWatched = 100_000

// PollStamp returns the poll endpoint's stamp, or false when this process
// is not listening and so cannot hear the endpoint change.
func (n *Nudger) PollStamp(endpointID uuid.UUID) (uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.stamps.listening {
		return 0, false
	}
	s, ok := n.stamps.watched[endpointID]
	if !ok {
		if len(n.stamps.watched) >= maxWatched {
			clear(n.stamps.watched)
			n.gapLocked()
		}
		s = n.stamps.seq
		n.stamps.watched[endpointID] = s
	}
	return max(s, n.stamps.gap), true
}

// setListening records that the listener's LISTEN took effect, or that
// its connection is gone: either way a gap.
func (n *Nudger) setListening(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stamps.listening = on
	n.gapLocked()
}

func (n *Nudger) gapLocked() {
	n.stamps.seq++
	n.stamps.gap = n.stamps.seq
}

// stampLocked records a change of the endpoint, if it is watched.
func (n *Nudger) stampLocked(endpointID uuid.UUID) {
	if _, ok := n.stamps.watched[endpointID]; ok {
		n.stamps.seq++
		n.stamps.watched[endpointID] = n.stamps.seq
	}
}

// Dispatch queues the dispatch of push endpoints inside the caller's
// transaction (TxNudger). A poll endpoint has no dispatch job: its
// readers are told instead, by a notification sent when the transaction
// commits, which wakes its waiting reads and changes its stamp.
func (n *Nudger) Dispatch(ctx context.Context, tx pgx.Tx, endpointIDs []uuid.UUID) error {
	_, err := n.DispatchLive(ctx, tx, endpointIDs)
	return err
}

// notifyPollIn tells the readers of poll endpoints, by a notification sent
// when tx commits.
func (n *Nudger) notifyPollIn(ctx context.Context, tx pgx.Tx, polled []uuid.UUID) error {
	return notifyIDs(polled, func(payload string) error {
		if err := dbq.New(tx).Notify(ctx, dbq.NotifyParams{Channel: wakeChannel, Payload: payload}); err != nil {
			return fmt.Errorf("notify poll readers: %w", err)
		}
		return nil
	})
}
