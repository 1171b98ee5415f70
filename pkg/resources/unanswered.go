package resources

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A write whose answer is lost (the connection breaks after the request went
// out, as when the API server restarts) may have been made. The manager then
// cannot know the object it wrote by UID or generation, so its watch event
// would look like someone else's change. The API server records who wrote:
// an object whose newest managedFields entry (status aside) is this
// manager's, from the time of that write, is the write's.

// unansweredWrite is the span, to the second the API server records
// managedFields times at, in which a write without an answer was sent; to
// is zero while the write still awaits its answer (its watch event can come
// first).
type unansweredWrite struct{ from, to time.Time }

// writeAttempt is when the apply last sent a create or update (zero: none
// since it was reset); sent tells the manager.
type writeAttempt struct {
	m  *Manager
	at time.Time
}

func (w *writeAttempt) sent() {
	w.at = w.m.clock.Now()
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.unanswered = &unansweredWrite{from: w.at.Truncate(time.Second)}
}

// mayHaveWritten: err leaves open whether the request was carried out, as
// no answer came: the connection was lost after the request went out, or
// the request timed out (the API server's own timeout says it may still be
// processing it). An answer of the server's (a refusal, a conflict, an
// invalid object) or a request never sent changed nothing.
func mayHaveWritten(err error) bool {
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var netErr net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
}

// answered settles the write in flight: one that may have been made
// (unanswered) is remembered until its object is seen, any other is
// forgotten (a successful write's object is owned already).
func (m *Manager) answered(unanswered bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.unanswered == nil:
	case unanswered:
		m.unanswered.to = m.clock.Now().Add(time.Second)
	default:
		m.unanswered = nil
	}
}

// ClaimUnanswered reports whether ds is the object of this manager's write
// whose answer was lost, or has yet to come: its newest managedFields entry
// (status aside) is this manager's, timed within that write. The manager
// then owns it, as if the write had answered, and forgets the lost answer.
func (m *Manager) ClaimUnanswered(ds *appsv1.DaemonSet) bool {
	m.mu.Lock()
	u := m.unanswered
	m.mu.Unlock()
	if u == nil || !writtenWithin(ds, u.from, u.to) {
		return false
	}
	m.own(ds, nil) // forgets the lost answer
	return true
}

// writtenWithin: ds's newest managedFields entry with a time, status aside,
// is FieldManager's, and its time is within [from, to] (to zero: open).
func writtenWithin(ds *appsv1.DaemonSet, from, to time.Time) bool {
	var newest *time.Time
	mine := false
	for i := range ds.ManagedFields {
		e := &ds.ManagedFields[i]
		if e.Subresource == "status" || e.Time == nil {
			continue
		}
		if t := e.Time.Time; newest == nil || t.After(*newest) {
			newest, mine = &t, e.Manager == FieldManager
		} else if t.Equal(*newest) && e.Manager != FieldManager {
			mine = false // a tie with another writer: not provably ours
		}
	}
	return mine && !newest.Before(from) && (to.IsZero() || !newest.After(to))
}
