package dispatch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// held is how many events' payloads are held.
func (s *sharedPayloads) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// users is how many sends use the payload of an event held, 0 if none.
func (s *sharedPayloads) users(eventID uuid.UUID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.m[eventID]; p != nil {
		return p.users
	}
	return 0
}

// TestSharedPayloadReadOnce: the sends of one event in flight at once share
// one reading of its payload, which a worker that keeps none lets go of
// when the last is done, and a later send reads again.
func TestSharedPayloadReadOnce(t *testing.T) {
	t.Parallel()
	s := newSharedPayloads(0)
	ev := uuid.New()
	const sends = 5
	var reads atomic.Int32
	unblock := make(chan struct{})
	read := func(context.Context) ([]byte, int, error) {
		reads.Add(1)
		<-unblock
		return []byte(`{"big":true}`), sends, nil
	}
	got := make([][]byte, sends)
	releases := make([]func(), sends)
	errs := make([]error, sends)
	var wg sync.WaitGroup
	for i := range sends {
		wg.Go(func() { got[i], releases[i], errs[i] = s.get(t.Context(), ev, true, read) })
	}
	require.Eventually(t, func() bool { return s.users(ev) == sends }, 10*time.Second, time.Millisecond,
		"every send waits for the one reading")
	close(unblock)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), reads.Load(), "read once")
	for i := range got {
		require.Same(t, &got[0][0], &got[i][0], "one copy, shared")
	}
	for i, release := range releases {
		require.Equal(t, 1, s.held(), "held while send %d is in flight", i)
		release()
	}
	require.Zero(t, s.held(), "let go of after the last send")

	_, release, err := s.get(t.Context(), ev, true, read)
	require.NoError(t, err)
	release()
	require.Equal(t, int32(2), reads.Load(), "read again by a later send")
}

// TestSharedPayloadReadFails: a failed reading fails the send that read,
// and a send that waited for it reads again itself.
func TestSharedPayloadReadFails(t *testing.T) {
	t.Parallel()
	s := newSharedPayloads(0)
	ev := uuid.New()
	failing := make(chan struct{})
	failed := errors.New("read payload: the reader's context ended")
	var readerErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, readerErr = s.get(t.Context(), ev, true, func(context.Context) ([]byte, int, error) {
			<-failing
			return nil, 0, failed
		})
	}()
	require.Eventually(t, func() bool { return s.users(ev) == 1 }, 10*time.Second, time.Millisecond)

	waited := make(chan []byte)
	go func() {
		data, release, err := s.get(t.Context(), ev, true, func(context.Context) ([]byte, int, error) { return []byte(`{"again":1}`), 1, nil })
		if err == nil {
			release()
		}
		waited <- data
	}()
	require.Eventually(t, func() bool { return s.users(ev) == 2 }, 10*time.Second, time.Millisecond)
	close(failing)
	<-done
	require.ErrorIs(t, readerErr, failed)
	require.JSONEq(t, `{"again":1}`, string(<-waited), "the waiting send read it itself")
	require.Zero(t, s.held())
}
