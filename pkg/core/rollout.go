package core

import "time"

// Rollout is the progress of the rollout the loop waits for: any change of it is progress; zero: none.
type Rollout struct {
	UID                string
	Generation         int64
	Updated, Available int32
}

// FollowRollout follows the rollout the loop waits for now (zero: none); held: a diagnosis of it is
// under way, or its verdict stands. A new rollout, progress, or a diagnosis that found nothing starts
// a deadline from now; else what stands stays. void: the diagnosis and verdict so far no longer apply.
func (s *State) FollowRollout(p Rollout, held bool, deadline time.Duration, now time.Time) (void bool) {
	t := &s.timers[PartRollout]
	switch {
	case p == Rollout{}:
		s.rollout, s.rolledAt, *t = Rollout{}, time.Time{}, time.Time{}
		return true
	case p == s.rollout && (!t.IsZero() || held):
		return false
	}
	s.rollout, s.rolledAt, *t = p, now, now.Add(deadline)
	return true
}

// FollowedRollout is the rollout followed and the time of its last progress.
func (s *State) FollowedRollout() (Rollout, time.Time) { return s.rollout, s.rolledAt }

// followExpect arms the deadline of an own write the cache has yet to show (pending), timeout after first awaited.
func (s *State) followExpect(pending bool, timeout time.Duration, now time.Time) {
	t := &s.timers[PartExpect]
	switch {
	case !pending:
		*t = time.Time{}
	case t.IsZero():
		*t = now.Add(timeout)
	}
}
