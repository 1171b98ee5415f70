package core

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func testPolicy() Policy { return DefaultPolicy() }

// The loop's one timer fires at the earliest deadline, and the parts due
// then run earliest first, in Part order on a tie.
func TestDueRunsTheEarliestFirstAndPartOrderOnATie(t *testing.T) {
	s := New(testPolicy(), time.Minute)
	t0 := time.Unix(1_000_000, 0)
	s.timers[PartRollout] = t0.Add(time.Second)
	s.timers[PartGate] = t0.Add(2 * time.Second)
	s.timers[PartExpect] = t0.Add(2 * time.Second)
	s.timers[PartRetry] = t0.Add(time.Hour)
	if at, ok := s.Deadline(); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("Deadline() = %v, %v; want the rollout's, 1s", at.Sub(t0), ok)
	}
	if due := s.Due(t0); len(due) != 0 {
		t.Fatalf("due before any deadline came: %v", due)
	}
	got := s.Due(t0.Add(2 * time.Second))
	if want := []Part{PartRollout, PartExpect, PartGate}; !slices.Equal(got, want) {
		t.Fatalf("Due = %v, want %v", got, want)
	}
	s.stopped()
	if _, ok := s.Deadline(); ok {
		t.Fatal("a deadline is armed after Stopped")
	}
}

// Two states that decide the same from now on have one key, whenever they
// got there; a state whose retry is due at another time has another.
func TestKeyIsRelativeToNow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	a, b := New(testPolicy(), time.Minute), New(testPolicy(), time.Minute)
	a.failed(errors.New("refused"), false, 0, t0)
	a.scheduleRetry(time.Second, t0)
	b.failed(errors.New("refused"), false, 0, t0.Add(time.Hour))
	b.scheduleRetry(time.Second, t0.Add(time.Hour))
	if ka, kb := a.Key(t0), b.Key(t0.Add(time.Hour)); ka != kb {
		t.Fatalf("keys differ:\n%s\n%s", ka, kb)
	}
	if ka, kb := a.Key(t0), b.Key(t0); ka == kb {
		t.Fatalf("states an hour apart share the key %s", ka)
	}
}

// The retry comes when the inertia ends if that is before the backoff's
// delay, so that the failures persist on an attempt that failed.
func TestRetryComesAtTheInertiaIfThatIsFirst(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := New(testPolicy(), time.Minute)
	s.failed(errors.New("refused"), false, 0, t0)
	now := t0.Add(50 * time.Second)
	if d := s.scheduleRetry(time.Minute, now); d != 10*time.Second {
		t.Fatalf("retry in %s, want 10s: when the inertia ends", d)
	}
	if s.Persists(now) || !s.Persists(t0.Add(time.Minute)) {
		t.Fatal("the failures do not persist exactly at the inertia")
	}
	s.succeeded()
	if s.RetryPending() || s.Persists(t0.Add(time.Hour)) {
		t.Fatal("a success left a retry or the failures")
	}
	// A failure of the controller's own input persists at once: no retry
	// changes it.
	s.failed(errors.New("RELATED_IMAGE_EXTRACTOR unset"), true, 0, t0)
	if !s.Persists(t0) {
		t.Fatal("a failure of the controller's own input waits for the inertia")
	}
}

// A rollout's deadline comes a deadline after its last progress; without
// progress it stands, and so does a diagnosis or verdict once it came; a
// diagnosis that found nothing starts another; no rollout clears it.
func TestFollowRolloutArmsFromTheLastProgress(t *testing.T) {
	s := New(testPolicy(), time.Minute)
	t0 := time.Unix(1_000_000, 0)
	const d = 10 * time.Minute
	p := Rollout{UID: "u", Generation: 2, Updated: 1, Available: 1}
	deadline := func() time.Duration {
		at, ok := s.At(PartRollout)
		if !ok {
			return -1
		}
		return at.Sub(t0)
	}
	if !s.FollowRollout(p, false, d, t0) || deadline() != d {
		t.Fatalf("a new rollout: deadline %v, want %v", deadline(), d)
	}
	if s.FollowRollout(p, false, d, t0.Add(time.Minute)) || deadline() != d {
		t.Fatalf("no progress: deadline %v, want it to stand at %v", deadline(), d)
	}
	p.Updated = 2
	if !s.FollowRollout(p, false, d, t0.Add(time.Minute)) || deadline() != time.Minute+d {
		t.Fatalf("progress: deadline %v, want %v", deadline(), time.Minute+d)
	}
	if !s.Fire(PartRollout, t0.Add(time.Minute+d)) {
		t.Fatal("the deadline did not fire when due")
	}
	if s.FollowRollout(p, true, d, t0.Add(time.Minute+d)) || deadline() != -1 {
		t.Fatal("a diagnosis under way did not stand")
	}
	if !s.FollowRollout(p, false, d, t0.Add(2*time.Minute+d)) || deadline() != 2*time.Minute+2*d {
		t.Fatalf("after an empty diagnosis: deadline %v, want another from now", deadline())
	}
	if got, since := s.FollowedRollout(); got != p || !since.Equal(t0.Add(2*time.Minute+d)) {
		t.Fatalf("followed %+v since %v", got, since)
	}
	if !s.FollowRollout(Rollout{}, false, d, t0) || deadline() != -1 {
		t.Fatal("no rollout left a deadline")
	}
}
