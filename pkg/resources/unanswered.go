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

	"github.com/insights-runtime-extractor/controller/pkg/core"
)

// unansweredWrite is when a write without an answer was sent, to the second (managedFields'
// precision); to is zero while the answer is awaited (its watch event can come first).
type unansweredWrite struct{ from, to time.Time }

// sending records a write about to be sent as unanswered.
func (m *Manager) sending() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unanswered = &unansweredWrite{from: m.clock.Now().Truncate(time.Second)}
}

// mayHaveWritten: no answer came (the connection broke, or it timed out), so the request may have been carried out.
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

// answered settles the write in flight: one that may have been made is kept until its object is seen.
func (m *Manager) answered(unanswered bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !unanswered {
		m.unanswered = nil
	} else if m.unanswered != nil {
		m.unanswered.to = m.clock.Now().Add(time.Second)
	}
}

// ClaimUnanswered reports whether o, by its WrittenAt within the write's time, is the object of an own write whose
// answer was lost or is yet to come (by UID and generation, someone else's change); the manager then owns it.
func (m *Manager) ClaimUnanswered(o core.Observation) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.unanswered
	if u == nil || o.WrittenAt.IsZero() || o.WrittenAt.Before(u.from) || !u.to.IsZero() && o.WrittenAt.After(u.to) {
		return false
	}
	m.record(o.UID, o.Generation, o.Meta, o.Version, "") // forgets the lost answer
	return true
}

// WrittenAt is the time of ds's newest managedFields entry with a time, status aside, when it
// is FieldManager's alone; zero otherwise (a tie with another writer is not provably ours).
func WrittenAt(ds *appsv1.DaemonSet) time.Time {
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
			mine = false
		}
	}
	if !mine {
		return time.Time{}
	}
	return *newest
}
