// Package watch keeps what a test double has seen (requests, spans, mails)
// and lets a test wait for a condition on it, checked again each time
// something is added rather than by sleeping.
package watch

import (
	"sync"
	"time"
)

// List is a list that signals each addition. Its zero value is ready to
// use, and its methods are safe for concurrent use.
type List[T any] struct {
	mu      sync.Mutex
	items   []T
	changed chan struct{} // closed and replaced after each addition
}

// Add appends items and returns the list's new length.
func (l *List[T]) Add(items ...T) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, items...)
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return len(l.items)
}

// Items returns a copy of the list.
func (l *List[T]) Items() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// Len is the list's length.
func (l *List[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// Await blocks until cond holds for the list, checking again after each
// addition, and reports whether it did before timeout passed. cond is
// called with the list itself under its lock: it must neither keep the
// slice nor call the List.
func (l *List[T]) Await(timeout time.Duration, cond func(items []T) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ok, changed := l.check(cond)
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// check runs cond under the lock and, when it fails, returns the channel
// the next addition closes.
func (l *List[T]) check(cond func([]T) bool) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cond(l.items) {
		return true, nil
	}
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return false, l.changed
}
