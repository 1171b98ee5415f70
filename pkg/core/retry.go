package core

import "time"

// retry is the failures of the controller's actions: a failed apply or delete is re-asserted at the
// retry's deadline, never dropped. The backoff is the loop's limiter's; when failures persist is ours.
type retry struct {
	failures int           // consecutive failed actions
	since    time.Time     // the first of them
	lastErr  error         // the latest failure's error
	ownInput bool          // the latest failure is of the controller's own input
	retryIn  time.Duration // the backoff of the pending retry, 0 for none
}

// failed records a failed action that took took and ended at now; ownInput: see Result.OwnInput.
func (s *State) failed(err error, ownInput bool, took time.Duration, now time.Time) {
	if s.retry.failures == 0 {
		s.retry.since = now.Add(-took)
	}
	s.retry.failures++
	s.retry.lastErr, s.retry.ownInput = err, ownInput
}

// succeeded ends the failures and cancels a pending retry, which would only re-assert.
func (s *State) succeeded() {
	s.retry, s.timers[PartRetry] = retry{}, time.Time{}
}

// scheduleRetry arms the retry after backoff, or sooner at the inertia: Degraded turns True on time, on an attempt.
func (s *State) scheduleRetry(backoff time.Duration, now time.Time) time.Duration {
	if until := s.retry.since.Add(s.inertia).Sub(now); until > 0 && until < backoff {
		backoff = until
	}
	s.timers[PartRetry], s.retry.retryIn = now.Add(backoff), backoff
	return backoff
}

// RetryPending: a retry is armed.
func (s *State) RetryPending() bool { return !s.timers[PartRetry].IsZero() }

// Failures are the consecutive failures and the pending retry's backoff (0 for none).
func (s *State) Failures() (n int, retryIn time.Duration) { return s.retry.failures, s.retry.retryIn }

// LastError is the latest failure's error, nil when the last action succeeded.
func (s *State) LastError() error { return s.retry.lastErr }

// Persists: the failures have lasted the inertia, or the latest is of the controller's own input,
// which no retry changes; what the cluster answers (an outage, a refusal) can end without it.
func (s *State) Persists(now time.Time) bool {
	r := s.retry
	return r.failures > 0 && r.lastErr != nil && (r.ownInput || !now.Before(r.since.Add(s.inertia)))
}
