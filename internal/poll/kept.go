package poll

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// An idle client's re-poll would otherwise cost a look-up of its endpoint
// each time. The Reader keeps each poll endpoint's last look-up and uses
// it again while the endpoint's stamp (Waiters.PollStamp) has not changed:
// no delivery to it committed, its secret, tenant and existence unchanged,
// and nothing heard of it missed. A read that writes (places or marks
// deliveries) forgets it, since the positions it holds moved.

// keptFor bounds how long a kept look-up is used, a backstop for a change
// that reached no stamp.
const keptFor = 5 * time.Minute

// maxKept bounds the look-ups kept; past it, the Reader forgets them all.
const maxKept = 100_000

type keptTarget struct {
	target Target
	stamp  uint64
	at     time.Time
}

// lookUp returns the endpoint's look-up, kept (true) or made now.
func (r *Reader) lookUp(ctx context.Context, id uuid.UUID) (Target, bool, error) {
	var stamp uint64
	stamped := false
	if r.cfg.Nudger != nil {
		stamp, stamped = r.cfg.Nudger.PollStamp(id)
	}
	if stamped {
		r.mu.Lock()
		k, ok := r.kept[id]
		r.mu.Unlock()
		if ok && k.stamp == stamp && time.Since(k.at) < keptFor {
			return k.target, true, nil
		}
	}
	r.lookUps.Add(1)
	t, err := readTarget(ctx, r.cfg.Store, id)
	if err != nil || !stamped || !t.Poll || t.TenantDisabled {
		return t, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.kept) >= maxKept {
		clear(r.kept)
	}
	r.kept[id] = keptTarget{target: t, stamp: stamp, at: time.Now()}
	return t, false, nil
}

// Forget drops the endpoint's kept look-up: a change this process made,
// which the others hear of by notification (dispatch's poll stamps).
func (r *Reader) Forget(id uuid.UUID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.kept, id)
}

// LookUps is how many times the Reader has looked an endpoint up in the
// database.
func (r *Reader) LookUps() int64 { return r.lookUps.Load() }
