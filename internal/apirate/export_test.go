package apirate

import "github.com/google/uuid"

// Asked is the tokens asked of the tenant's bucket lately (its demand
// windows), for tests that wait for requests to arrive.
func (s *Shared) Asked(tenant uuid.UUID) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		return t.cur + t.prev
	}
	return 0
}

// Idle reports whether no call on the shared buckets is under way.
func (s *Shared) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tenants {
		if t.call != nil {
			return false
		}
	}
	return true
}

// Local is the tenant's leased tokens, unexpired or not.
func (s *Shared) Local(tenant uuid.UUID) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		return t.local()
	}
	return 0
}
