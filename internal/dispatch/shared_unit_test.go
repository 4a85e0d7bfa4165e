package dispatch

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// reader is a payloadRead of an event with sends to come that counts its
// readings.
type reader struct {
	data  []byte
	sends int
	reads int
}

func (r *reader) read(context.Context) ([]byte, int, error) {
	r.reads++
	return r.data, r.sends, nil
}

// sendOnce sends an event's payload once, from start to end.
func sendOnce(t *testing.T, s *sharedPayloads, ev uuid.UUID, r *reader) {
	t.Helper()
	data, release, err := s.get(t.Context(), ev, true, r.read)
	require.NoError(t, err)
	require.Equal(t, r.data, data)
	release()
}

// TestSharedPayloadKept: a payload whose event has sends to come is kept
// once its last send in flight is done, so that the next send (another
// endpoint's run) does not read it again, and is let go of after the last
// send to come, or keepFor after its last use.
func TestSharedPayloadKept(t *testing.T) {
	t.Parallel()
	s := newSharedPayloads(1 << 20)
	ev := uuid.New()
	r := &reader{data: []byte(`{"big":1}`), sends: 3}
	sendOnce(t, s, ev, r)
	require.Equal(t, 1, s.held(), "kept: two sends to come")
	sendOnce(t, s, ev, r)
	require.Equal(t, 1, r.reads, "the second send did not read it again")
	sendOnce(t, s, ev, r)
	require.Equal(t, 1, r.reads)
	require.Zero(t, s.held(), "let go of after the last send to come")

	one := &reader{data: []byte(`{"big":2}`), sends: 1}
	sendOnce(t, s, uuid.New(), one)
	require.Zero(t, s.held(), "no send to come: not kept")

	ahead := &reader{data: []byte(`{"big":3}`), sends: 1}
	_, release, err := s.get(t.Context(), uuid.New(), false, ahead.read)
	require.NoError(t, err)
	release()
	require.Equal(t, 1, s.held(), "read ahead: its send is to come")

	s.keepFor = time.Millisecond
	sendOnce(t, s, uuid.New(), r)
	require.Eventually(t, func() bool { return s.held() == 1 }, 10*time.Second, time.Millisecond,
		"let go of keepFor after its last use")
}

// TestSharedPayloadKeepBound: the payloads kept, used by no send, come to at
// most keep bytes: the oldest is let go of first, and one larger than keep
// is not kept.
func TestSharedPayloadKeepBound(t *testing.T) {
	t.Parallel()
	const size, keep = 1000, 2500
	s := newSharedPayloads(keep)
	evs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	readers := make([]*reader, len(evs))
	for i, ev := range evs {
		readers[i] = &reader{data: bytes.Repeat([]byte{'7'}, size), sends: 2}
		sendOnce(t, s, ev, readers[i])
		require.LessOrEqual(t, s.keptBytes(), keep)
	}
	require.Equal(t, 2, s.held(), "two of 1000 bytes fit in 2500")
	sendOnce(t, s, evs[0], readers[0])
	require.Equal(t, 2, readers[0].reads, "the oldest was let go of")
	sendOnce(t, s, evs[2], readers[2])
	require.Equal(t, 1, readers[2].reads, "the newest was kept")

	big := &reader{data: bytes.Repeat([]byte{'7'}, keep+1), sends: 2}
	before := s.held()
	sendOnce(t, s, uuid.New(), big)
	require.Equal(t, before, s.held(), "larger than keep: not kept")
	require.LessOrEqual(t, s.keptBytes(), keep)
}

// keptBytes is the bytes of payloads kept, unused.
func (s *sharedPayloads) keptBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept
}
