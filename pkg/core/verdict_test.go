package core

import (
	"fmt"
	"testing"
	"time"
)

// write is one change of the DaemonSet by names (none: a deletion) at t0+at.
type write struct {
	at    time.Duration
	names []string
}

// scripted plays writes against p as the control loop drives the gate: a
// decision to repair is made at once, a deadline when it comes. It returns
// the repairs, and whether a fight was reported at any point.
func scripted(p Policy, writes []write) (repairs []time.Time, fought bool) {
	var l Log
	var timer time.Time
	decided := func(d Decision, now time.Time) {
		timer = d.At
		if d.Repair {
			l = p.Repaired(l, now)
			repairs = append(repairs, now)
		}
		fought = fought || l.Fighting()
	}
	dueUntil := func(until time.Time) {
		for !timer.IsZero() && !timer.After(until) {
			now := timer
			var d Decision
			l, d = p.Due(l, now)
			decided(d, now)
		}
	}
	for _, w := range writes {
		now := t0.Add(w.at)
		dueUntil(now)
		var d Decision
		l, d = p.Changed(l, w.names, now)
		decided(d, now)
	}
	dueUntil(t0.Add(24 * time.Hour))
	return repairs, fought
}

// undoneWithin fails unless every write that ends a run (the next write
// comes more than 5 s later, or none does) is followed by a repair within
// limit.
func undoneWithin(writes []write, repairs []time.Time, limit time.Duration) error {
	for i, w := range writes {
		if i+1 < len(writes) && writes[i+1].at-w.at <= 5*time.Second {
			continue
		}
		at := t0.Add(w.at)
		var next time.Time
		for _, r := range repairs {
			if !r.Before(at) {
				next = r
				break
			}
		}
		if next.IsZero() || next.Sub(at) > limit {
			return fmt.Errorf("the change at %s by %v was repaired at %v, want within %s (repairs: %v)",
				w.at, w.names, next.Sub(t0), limit, offsets(repairs))
		}
	}
	return nil
}

// An admin's run of edits (issue 46, escape 7): 3 deletions back to back, a
// minute later 3 image edits by kubectl patch, a label removal by kubectl
// label, a 20 s storm of kubectl patch, then a deletion. B(T) allows every
// repair, so every run's last change is undone within 5 s: deletions by
// nobody in particular are not one writer's undos, and the verdict (kubectl
// patch undid 3 repairs within 15 minutes) holds nothing back.
func TestAnAdminsRunOfEditsIsRepairedWithin5s(t *testing.T) {
	s := time.Second
	writes := []write{{0, nil}, {4 * s, nil}, {8 * s, nil}}
	for _, at := range []time.Duration{64 * s, 66 * s, 68 * s} {
		writes = append(writes, write{at, []string{"kubectl-patch"}})
	}
	writes = append(writes, write{76 * s, []string{"kubectl-label"}})
	for at := 84 * s; at <= 104*s; at += s {
		writes = append(writes, write{at, []string{"kubectl-patch"}})
	}
	writes = append(writes, write{4 * time.Minute, nil})
	p := DefaultPolicy()
	repairs, _ := scripted(p, writes)
	t.Logf("repairs at %v", offsets(repairs))
	if err := undoneWithin(writes, repairs, 5*s); err != nil {
		t.Error(err)
	}
	if err := checkBound(p, repairs); err != nil {
		t.Error(err)
	}
}

// Deletions by nobody in particular, minutes apart, are no fight however
// many there are: only reaching the budget makes them one.
func TestUnrelatedDeletionsAreNoFight(t *testing.T) {
	var writes []write
	for at := time.Duration(0); at < 2*time.Hour; at += 3 * time.Minute {
		writes = append(writes, write{at, nil})
	}
	if _, fought := scripted(DefaultPolicy(), writes); fought {
		t.Error("deletions 3 minutes apart were reported as a fight")
	}
	var loop []write
	for at := time.Duration(0); at < 5*time.Minute; at += 5 * time.Second {
		loop = append(loop, write{at, nil})
	}
	if _, fought := scripted(DefaultPolicy(), loop); !fought {
		t.Error("a deletion every 5 s, which spends the budget, was not reported as a fight")
	}
}

// A writer that escapes the 15-minute window (issue 46, escape 1) is still
// reported within the hour: one that rotates 5 manager names, writing every
// 7.6 minutes, and one name writing every 10 minutes (a CronJob).
func TestSlowAndRotatingWritersAreReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		every  time.Duration
		names  int
		within time.Duration // reported within this of the first undo
	}{
		{"5 names in turn, every 7.6 min", 7*time.Minute + 36*time.Second, 5, time.Hour},
		{"one name every 10 min", 10 * time.Minute, 1, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			var writes []write
			for i := range 40 {
				writes = append(writes, write{time.Duration(i) * tc.every, []string{fmt.Sprintf("cron-%d", i%tc.names)}})
			}
			firstUndo := time.Duration(tc.names) * tc.every
			var until []write
			for _, w := range writes {
				if w.at <= firstUndo+tc.within {
					until = append(until, w)
				}
			}
			if _, fought := scripted(p, until); !fought {
				t.Errorf("not reported within %s of its first undo", tc.within)
			}
			if _, fought := scripted(p, writes[:tc.names+2]); fought {
				t.Error("reported after its first two undos")
			}
		})
	}
}
