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

// IsOwnWrite reports whether uid at generation is (an older view of) what this manager wrote or adopted, now or before.
func (m *Manager) IsOwnWrite(uid types.UID, generation int64) bool {
	o, ok := m.written(uid)
	return ok && generation <= o.generation
}

// written returns what this manager wrote to uid, now or before (past holds no ""): a copy, safe to read unlocked.
func (m *Manager) written(uid types.UID) (ownedObject, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned.uid == uid && uid != "" {
		return m.owned, true
	}
	if i := slices.IndexFunc(m.past, func(o ownedObject) bool { return o.uid == uid }); i >= 0 {
		return m.past[i], true
	}
	return ownedObject{}, false
}

// OwnedAnnotations are the annotations every write sets, sorted: version, spec hash, the manifest's own.
var OwnedAnnotations = sync.OnceValue(func() []string {
	keys := []string{VersionAnnotation, SpecHashAnnotation}
	if ds, err := parsedManifest(); err == nil {
		keys = append(keys, slices.Collect(maps.Keys(ds.Annotations))...)
	}
	slices.Sort(keys)
	return keys
})

// OwnedMetadata maps ds's OwnedLabels and OwnedAnnotations to their values: a change is drift, the generation kept.
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

// IsOwnMetadata reports whether an update of uid to rv with meta is no drift: the latest write's meta, or a write's rv.
func (m *Manager) IsOwnMetadata(uid types.UID, rv string, meta map[string]string) bool {
	o, ok := m.written(uid)
	return ok && (maps.Equal(o.meta, meta) || rv != "" && slices.Contains(o.versions, rv))
}

// Owns reports whether uid is the object last written or adopted and not deleted since; "" asks whether there is one.
func (m *Manager) Owns(uid types.UID) bool {
	owned := m.ownedUID()
	return owned != "" && (uid == "" || uid == owned)
}

func (m *Manager) ownedUID() types.UID { // "" before any write and after a delete
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned.uid
}

// unansweredWrite is when a write without an answer was sent, to managedFields' second; to is zero while awaited.
type unansweredWrite struct{ from, to time.Time }

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

// ClaimUnanswered owns o, and reports so, if its WrittenAt falls within an own write whose answer is lost or due.
func (m *Manager) ClaimUnanswered(o core.Observation) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.unanswered; u == nil || o.WrittenAt.IsZero() || o.WrittenAt.Before(u.from) || !u.to.IsZero() && o.WrittenAt.After(u.to) {
		return false
	}
	m.record(o.UID, o.Generation, o.Meta, o.Version, "") // forgets the lost answer
	return true
}

// WrittenAt is the time of ds's newest managedFields entry (status aside) if FieldManager's alone (no tie), else zero.
func WrittenAt(ds *appsv1.DaemonSet) time.Time {
	var newest *time.Time
	mine := false
	for _, e := range ds.ManagedFields {
		switch {
		case e.Subresource == "status" || e.Time == nil: // skipped
		case newest == nil || e.Time.Time.After(*newest):
			newest, mine = &e.Time.Time, e.Manager == FieldManager
		case e.Time.Time.Equal(*newest) && e.Manager != FieldManager:
			mine = false
		}
	}
	if !mine {
		return time.Time{}
	}
	return *newest
}

// ExpectationTimeout bounds how long an own write may stay unseen by the cache (usually ms) before the server is read.
const ExpectationTimeout = 5 * time.Second

// ownedObject is one incarnation of the DaemonSet as this manager wrote it (a recreate restarts at generation 1).
type ownedObject struct {
	uid        types.UID
	generation int64
	meta       map[string]string // OwnedMetadata as last written or adopted
	versions   []string          // of the last few writes and what each replaced: an older one's event can come late
}

const maxOwnedVersions, maxPast = 8, 4 // the versions kept per object; the objects kept after the manager moved on

// expectedGeneration returns the generation ApplyDaemonSet should expect of existing, and whether to adopt it.
func (m *Manager) expectedGeneration(existing *appsv1.DaemonSet) (int64, bool) {
	if existing == nil {
		return 0, false // library-go creates; the value is unused.
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned.uid != "" && m.owned.uid == existing.UID {
		return m.owned.generation, false
	}
	return -1, true // no generation matches: write.
}

// expectation returns a copy of the expected own write while the cache (cached, nil: nothing) lags behind it.
func (m *Manager) expectation(cached *appsv1.DaemonSet) *appsv1.DaemonSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if exp := m.expected; exp != nil && m.clock.Now().Before(m.expectedUntil) &&
		(cached == nil || cached.UID == exp.UID && cached.Generation < exp.Generation) {
		return exp.DeepCopy() // our create or update is not in the cache yet
	}
	m.expected = nil // none, timed out (read the server or trust the cache), shown, or another object holds the name
	return nil
}

// AwaitsOwnWrite reports whether an own write is still awaited in the cache; unlike Expecting, it ends none.
func (m *Manager) AwaitsOwnWrite() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.expected != nil && m.clock.Now().Before(m.expectedUntil)
}

// Expecting reports how long an own write may still be awaited in the cache; a timed-out one is due (0, true) once.
func (m *Manager) Expecting() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expected == nil {
		return 0, false
	}
	left := m.expectedUntil.Sub(m.clock.Now())
	if left <= 0 {
		m.expected = nil
		return 0, true
	}
	return left, true
}

// ObservedDeletion tells the manager that the informer saw object uid deleted, or ("") that a live read found none.
func (m *Manager) ObservedDeletion(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expected != nil && (uid == "" || m.expected.UID == uid) {
		m.expected = nil
	}
}

// record makes object uid at generation, meta and rv (replacing replacedRV, or "") the owned object; caller holds m.mu.
func (m *Manager) record(uid types.UID, generation int64, meta map[string]string, rv, replacedRV string) {
	m.unanswered = nil // this write answered, or is the one that did not
	if m.owned.uid != uid {
		m.retire()
		m.owned = ownedObject{uid: uid}
	}
	m.owned.generation, m.owned.meta = generation, meta
	for _, v := range []string{replacedRV, rv} {
		if v != "" && !slices.Contains(m.owned.versions, v) {
			m.owned.versions = append(m.owned.versions, v)
			m.owned.versions = m.owned.versions[max(len(m.owned.versions)-maxOwnedVersions, 0):]
		}
	}
}

// retire moves the owned object to the past; caller holds m.mu.
func (m *Manager) retire() {
	if m.owned.uid != "" {
		m.past = append(m.past, m.owned)
		m.past = m.past[max(len(m.past)-maxPast, 0):]
	}
}
