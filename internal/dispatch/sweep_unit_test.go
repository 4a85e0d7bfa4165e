package dispatch

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestUnitWalkFrom(t *testing.T) {
	t.Parallel()
	a, b, c := uuid.MustParse("00000000-0000-7000-8000-00000000000a"),
		uuid.MustParse("00000000-0000-7000-8000-00000000000b"),
		uuid.MustParse("00000000-0000-7000-8000-00000000000c")
	require.Equal(t, c, walkFrom([]uuid.UUID{a, c, b}, 3), "a full walk: the next goes on past the last it found")
	require.Equal(t, uuid.Nil, walkFrom([]uuid.UUID{a, b}, 3), "a short walk reached the end: the next starts from the first")
	require.Equal(t, uuid.Nil, walkFrom(nil, 3))
}
