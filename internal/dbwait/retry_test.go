package dbwait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetry(t *testing.T) {
	t.Parallel()
	errNoWriter := errors.New("no server takes writes")
	again := func(err error) bool { return errors.Is(err, errNoWriter) }

	// Tried again until it succeeds.
	tries := 0
	err := Retry(context.Background(), again, func(context.Context) error {
		if tries++; tries < 3 {
			return errNoWriter
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, tries)

	// An error again refuses ends it at once.
	errOther := errors.New("other")
	tries = 0
	err = Retry(context.Background(), again, func(context.Context) error { tries++; return errOther })
	require.ErrorIs(t, err, errOther)
	require.Equal(t, 1, tries)

	// The pauses count towards the request's bound: a failover longer than
	// the bound ends with the last error and the bound exceeded.
	ctx, stop := WithBudget(context.Background(), 300*time.Millisecond)
	defer stop()
	tries = 0
	err = Retry(ctx, again, func(context.Context) error { tries++; return errNoWriter })
	require.ErrorIs(t, err, errNoWriter)
	require.True(t, Exceeded(ctx), "the bound ended the retries")
	require.Greater(t, tries, 1)
}
