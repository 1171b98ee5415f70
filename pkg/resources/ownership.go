package resources

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/insights-runtime-extractor/controller/pkg/core"
)

// IsOwnWrite reports whether object uid at generation is (an older view of) what this manager
// wrote or adopted, also since deleted or replaced; someone else's recreate has a new UID.
func (m *Manager) IsOwnWrite(uid types.UID, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && generation <= o.generation
}

// written returns what this manager wrote to uid, now or before (past holds no ""); caller holds m.mu.
func (m *Manager) written(uid types.UID) (ownedObject, bool) {
	if m.owned.uid == uid && uid != "" {
		return m.owned, true
	}
	if i := slices.IndexFunc(m.past, func(o ownedObject) bool { return o.uid == uid }); i >= 0 {
		return m.past[i], true
	}
	return ownedObject{}, false
}

// SpecHashAnnotation is where library-go's resourceapply records the spec's hash.
const SpecHashAnnotation = "operator.openshift.io/spec-hash"

// OwnedAnnotations are the annotations every write sets, sorted: version, spec hash, the manifest's own.
var OwnedAnnotations = sync.OnceValue(func() []string {
	keys := []string{VersionAnnotation, SpecHashAnnotation}
	if ds, err := parsedManifest(); err == nil {
		keys = append(keys, slices.Collect(maps.Keys(ds.Annotations))...)
	}
	slices.Sort(keys)
	return keys
})

// OwnedMetadata maps ds's OwnedLabels and OwnedAnnotations to their values ("" when absent):
// a change of one by someone else is drift, though the generation does not move.
func OwnedMetadata(ds *appsv1.DaemonSet) map[string]string {
	out := map[string]string{}
	for k := range OwnedLabels() {
		out["label:"+k] = ds.Labels[k]
	}
	for _, k := range OwnedAnnotations() {
		out["annotation:"+k] = ds.Annotations[k]
	}
	return out
}

// IsOwnMetadata reports whether an update of uid to resourceVersion rv with OwnedMetadata meta is not drift: meta is
// this manager's latest write's, or rv one its writes returned or overwrote. Older values written back are drift.
func (m *Manager) IsOwnMetadata(uid types.UID, rv string, meta map[string]string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.written(uid)
	return ok && (maps.Equal(o.meta, meta) || rv != "" && slices.Contains(o.versions, rv))
}

// Owns reports whether uid is the object this manager last wrote or adopted
// and has not deleted since; uid "" asks whether it owns one at all.
func (m *Manager) Owns(uid types.UID) bool {
	owned := m.ownedUID()
	return owned != "" && (uid == "" || uid == owned)
}

func (m *Manager) ownedUID() types.UID { // "" before any write and after a delete
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid
}

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
