package core

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/repairgate"
)

func testPolicy() repairgate.Policy { return repairgate.DefaultPolicy() }

// The loop's one timer fires at the earliest deadline, and the parts due
// then run earliest first, in Part order on a tie.
func TestDueRunsTheEarliestFirstAndPartOrderOnATie(t *testing.T) {
	s := New(testPolicy(), time.Minute)
	t0 := time.Unix(1_000_000, 0)
	s.Timer(PartRollout).ArmAt(t0.Add(time.Second))
	s.Timer(PartGate).ArmAt(t0.Add(2 * time.Second))
	s.Timer(PartExpect).ArmAt(t0.Add(2 * time.Second))
	s.Timer(PartRetry).ArmAt(t0.Add(time.Hour))
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
	s.Stopped()
	if _, ok := s.Deadline(); ok {
		t.Fatal("a deadline is armed after Stopped")
	}
}

// Two states that decide the same from now on have one key, whenever they
// got there; a state whose retry is due at another time has another.
func TestKeyIsRelativeToNow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	a, b := New(testPolicy(), time.Minute), New(testPolicy(), time.Minute)
	a.Failed(errors.New("refused"), 0, t0)
	a.ScheduleRetry(time.Second, t0)
	b.Failed(errors.New("refused"), 0, t0.Add(time.Hour))
	b.ScheduleRetry(time.Second, t0.Add(time.Hour))
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
	s.Failed(errors.New("refused"), 0, t0)
	now := t0.Add(50 * time.Second)
	if d := s.ScheduleRetry(time.Minute, now); d != 10*time.Second {
		t.Fatalf("retry in %s, want 10s: when the inertia ends", d)
	}
	never := func(error) bool { return false }
	if s.Persists(now, never) || !s.Persists(t0.Add(time.Minute), never) {
		t.Fatal("the failures do not persist exactly at the inertia")
	}
	s.Succeeded()
	if s.RetryPending() || s.Persists(t0.Add(time.Hour), never) {
		t.Fatal("a success left a retry or the failures")
	}
}
