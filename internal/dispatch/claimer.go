package dispatch

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/batch"
)

// claimer reads the unlocked claims of many endpoints' dispatch runs together
// (group commit, see package batch), as the recorder stores their attempts:
// under steady load of single events each run claims one or two deliveries
// a step, and a statement per claim was a large share of the database's
// work. A lone claim goes at once; claims that arrive while the committers
// are busy share the next statement.
type claimer struct {
	claim claimFunc
	batch *batch.Batcher[ClaimRequest, Claim]
}

// claimFunc claims for many endpoints in one statement:
// DB.ClaimUnlockedMany.
type claimFunc func(context.Context, []ClaimRequest) ([]Claim, error)

// maxClaimRuns bounds the runs whose claims one statement reads.
const maxClaimRuns = 100

// newClaimer returns a claimer claiming with claim, through committers
// concurrent statements.
func newClaimer(claim claimFunc, committers int) *claimer {
	cfg := batch.Config{Committers: committers, MaxBatch: maxClaimRuns}
	return &claimer{claim: claim, batch: batch.New(cfg, batch.CommitFunc[ClaimRequest, Claim](claim))}
}

// claimUnlocked claims what req asks for (up to N of an endpoint's due
// deliveries after a position), possibly in one statement with other runs'
// claims. After close it claims on its own.
func (c *claimer) claimUnlocked(ctx context.Context, req ClaimRequest) (Claim, error) {
	claimed, err := c.batch.Submit(ctx, req)
	if errors.Is(err, batch.ErrClosed) {
		all, err := c.claim(ctx, []ClaimRequest{req})
		if err != nil {
			return Claim{}, err
		}
		return all[0], nil
	}
	return claimed, err
}

func (c *claimer) close() { c.batch.Close() }
