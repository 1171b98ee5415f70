package runtimeextractor

import (
	"cmp"
	"slices"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// One writer's streak of repairs (the reasoning is at the top of
// repairgate.go; the gate keeps one streak per writer).

// maxFightWriters bounds the writers a fight names (and counts): a client
// chooses its manager name, so a churning one must not grow the map.
const maxFightWriters = 5

// repairStreak is one writer's streak of repairs of the DaemonSet and its fight
// verdict. It is owned by the control loop's goroutine; every method takes
// the current time.
type repairStreak struct {
	schedule    RepairBackoff // the zero value means DefaultRepairBackoff
	first, last time.Time     // the streak's first and latest repair; zero: none
	repairs     int
	// undone: someone else changed the DaemonSet after the latest repair,
	// and that is not repaired yet.
	undone bool
	// standing is when the latest repair was last known to stand: the
	// repair itself, or a later check that found nothing to undo.
	standing time.Time
	// changedBy names who changed it since the latest repair (metrics'
	// manager names, or an unnamed writer); writers counts the streak's
	// repairs of each.
	changedBy []string
	writers   map[string]int
	fight     bool
}

// unnamedWriter stands for changes no managedFields entry names (a deletion,
// a removal).
const unnamedWriter = "a writer managedFields does not name"

// backoff is the streak's schedule.
func (s *repairStreak) backoff() RepairBackoff {
	if s.schedule == (RepairBackoff{}) {
		return DefaultRepairBackoff
	}
	return s.schedule
}

// active: a streak is on (its latest repair has not stood for Quiet).
func (s *repairStreak) active(now time.Time) bool {
	return s.repairs > 0 && (s.undone || now.Sub(s.standing) < s.backoff().Quiet)
}

// changed records a change by someone else: by writers, and by one that
// managedFields does not name when unnamed (or writers is empty). Call
// settle first: a streak over by now is dropped here without a word.
func (s *repairStreak) changed(now time.Time, writers []editor, unnamed bool) {
	if !s.active(now) {
		s.reset()
	}
	s.undone = true
	add := func(name string) {
		if !slices.Contains(s.changedBy, name) {
			s.changedBy = append(s.changedBy, name)
		}
	}
	for _, w := range writers {
		add(w.manager)
	}
	if unnamed || len(writers) == 0 {
		add(unnamedWriter)
	}
}

// wait is how long a repair must wait now: 0 outside a streak.
func (s *repairStreak) wait(now time.Time) time.Duration {
	if !s.active(now) {
		return 0
	}
	return max(0, s.last.Add(s.backoff().delay(s.repairs)).Sub(now))
}

// repaired records a repair made now; it reports whether that repair made
// the streak a fight.
func (s *repairStreak) repaired(now time.Time) (declared bool) {
	if !s.active(now) {
		changedBy := s.changedBy
		s.reset()
		s.changedBy = changedBy
	}
	if s.repairs == 0 {
		s.first = now
	}
	s.repairs++
	s.last, s.standing, s.undone = now, now, false
	if s.writers == nil {
		s.writers = map[string]int{}
	}
	for _, n := range s.changedBy {
		if _, ok := s.writers[n]; ok || len(s.writers) < maxFightWriters {
			s.writers[n]++
		}
	}
	s.changedBy = s.changedBy[:0]
	if !s.fight && s.repairs >= fightMinRepairs && now.Sub(s.first) >= fightMinSpan {
		s.fight = true
		return true
	}
	return false
}

// stands records that, now, there was nothing of someone else's to undo:
// the other writer itself put back what the controller wants.
func (s *repairStreak) stands(now time.Time) {
	if s.undone {
		s.undone, s.standing = false, now
		s.changedBy = s.changedBy[:0]
	}
}

// settle ends a streak whose latest repair stood for Quiet; it
// reports whether that ended a fight.
func (s *repairStreak) settle(now time.Time) (ended bool) {
	if s.repairs == 0 || s.active(now) {
		return false
	}
	ended = s.fight
	s.reset()
	return ended
}

func (s *repairStreak) reset() { *s = repairStreak{schedule: s.schedule} }

// next is when the control loop must look at the streak again: when the
// repair it defers is due, or when the streak may end. ok is false when
// there is nothing to wait for: no streak, or a repair under way (an
// action's retry carries it on).
func (s *repairStreak) next(deferred bool) (at time.Time, ok bool) {
	switch {
	case s.repairs == 0:
		return time.Time{}, false
	case deferred:
		return s.last.Add(s.backoff().delay(s.repairs)), true
	case s.undone:
		return time.Time{}, false
	default:
		return s.standing.Add(s.backoff().Quiet), true
	}
}

// conflict is the fight for status, nil when there is none.
func (s *repairStreak) conflict(now time.Time) *status.ConflictingWriter {
	if !s.fight {
		return nil
	}
	c := &status.ConflictingWriter{Repairs: s.repairs, For: now.Sub(s.first), RepairEvery: s.backoff().delay(s.repairs)}
	for n, k := range s.writers {
		c.Writers = append(c.Writers, status.WriterCount{Manager: n, Repairs: k})
	}
	slices.SortFunc(c.Writers, func(a, b status.WriterCount) int {
		return cmp.Or(cmp.Compare(b.Repairs, a.Repairs), cmp.Compare(a.Manager, b.Manager))
	})
	return c
}
