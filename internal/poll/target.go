package poll

import "github.com/sluice-dev/sluice/internal/store"

// Target is the poll endpoint a read's token names, as Read's allow sees
// it: its tenant (and whether that tenant is disabled) and its id.
type Target = store.PollTarget
