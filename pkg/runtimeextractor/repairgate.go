package runtimeextractor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/repairgate"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// The loop's side of the repair gate. The rules (the budget, the order of
// repairs inside it, the fight) are package repairgate's, a pure function of
// its log; this keeps the log, the description of the repair to come, and
// the one timer that wakes the loop when the gate's next instant comes.

// RepairPolicy is the repair gate's rules (package repairgate).
type RepairPolicy = repairgate.Policy

// DefaultRepairPolicy is the repair gate's default: 6 repairs at once, one
// more a minute (package repairgate gives the reasons).
func DefaultRepairPolicy() RepairPolicy { return repairgate.DefaultPolicy() }

// nextRepair describes the drift a repair undoes: what changed and who
// changed it, for the repair's Event, log line and repairs_total.
type nextRepair struct {
	kinds   []DriftKind
	writers []writer // at most maxRepairWriters
	unnamed bool     // some of it no managedFields entry names
}

// maxRepairWriters bounds the writers one repair names: a client chooses
// its manager name, so a writer that churns names while a repair waits must
// not grow the description (nor repairs_total's labels, which the metrics
// cap as well).
const maxRepairWriters = repairgate.MaxNamedWriters

// repairGate decides when a repair of someone else's change is made: at
// once, or when the gate allows. It only answers; the loop logs, records
// Events and sets gauges on the answers. Owned by the loop's goroutine.
type repairGate struct {
	clock    clock.Clock
	policy   repairgate.Policy
	log      repairgate.Log
	granted  bool       // the gate allowed the outstanding repair: its write (or the retry of it) may be made
	deferred bool       // a repair waits for the gate: its timer makes it
	next     nextRepair // what the next repair undoes, and whose change it was
	wakeAt   deadline   // the deferred repair, or the fight's end
}

func newRepairGate(clk clock.Clock, policy repairgate.Policy) *repairGate {
	return &repairGate{clock: clk, policy: policy, wakeAt: deadline{clock: clk}}
}

// describe adds a drain's drift to the description of the repair to come:
// what is outstanding adds up, so its repair's Event names it all;
// otherwise the drain's drift replaces what an earlier repair undid.
func (g *repairGate) describe(d drain) {
	switch {
	case len(d.kinds) == 0:
	case g.outstanding():
		for _, k := range d.kinds {
			if !slices.Contains(g.next.kinds, k) {
				g.next.kinds = append(g.next.kinds, k)
			}
		}
		g.next.writers = capWriters(mergeWriters(g.next.writers, d.writers))
		g.next.unnamed = g.next.unnamed || d.unnamed
	default:
		g.next = nextRepair{kinds: slices.Clone(d.kinds), writers: capWriters(slices.Clone(d.writers)), unnamed: d.unnamed}
	}
}

// capWriters keeps the newest maxRepairWriters (mergeWriters sorts newest
// first).
func capWriters(ws []writer) []writer { return ws[:min(len(ws), maxRepairWriters)] }

// outstanding: someone else changed the DaemonSet, and no write of the
// controller has undone it yet. The next write that changes the DaemonSet
// is its repair, whatever led to it.
func (g *repairGate) outstanding() bool { return g.log.Outstanding() }

// fighting: some writer is in a tug-of-war with the controller.
func (g *repairGate) fighting() bool { return g.log.Fighting() }

// writersOf names the writers of d for the gate: each one managedFields
// names, and for a change no entry records the object's newest other
// manager, the likely writer (a writer's second write within a second
// leaves its entry as it was), else the unnamed writer.
func writersOf(d drain) []string {
	var names []string
	for _, e := range d.writers {
		names = append(names, e.manager)
	}
	likely := d.likely
	if len(d.kinds) == 0 || len(d.writers) == 0 && len(likely) == 0 {
		likely = append(likely, "")
	}
	for _, m := range likely {
		if m == "" {
			m = repairgate.Unnamed
		}
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// fightChange is how one of the gate's steps moved the fight verdict.
type fightChange struct{ started, ended bool }

// step runs one of the gate's functions and reports how it moved the
// verdict.
func (g *repairGate) step(f func(repairgate.Log) repairgate.Log) fightChange {
	was := g.log.Fighting()
	g.log = f(g.log)
	is := g.log.Fighting()
	return fightChange{started: !was && is, ended: was && !is}
}

// changed records someone else's change (d; a hint without observations
// counts as an unnamed one) that the level wants repaired. wait is how long
// its repair must wait (0: repair now).
func (g *repairGate) changed(d drain) (wait time.Duration, fc fightChange) {
	now := g.clock.Now()
	var dec repairgate.Decision
	fc = g.step(func(l repairgate.Log) repairgate.Log {
		l, dec = g.policy.Changed(l, writersOf(d), now)
		return l
	})
	if dec.Repair {
		g.deferred = false
		return 0, fc
	}
	g.granted, g.deferred = false, true
	return dec.At.Sub(now), fc
}

// repairing: the gate allows a repair now; nothing waits any more.
func (g *repairGate) repairing() { g.granted, g.deferred = true, false }

// deferring: a repair waits for the gate's timer.
func (g *repairGate) deferring() bool { return g.deferred }

// mayWrite is the gate's answer for any write that would undo an outstanding
// change (a repair, whatever asked for it: drift, a retry, a re-assert, a
// version or TLS change): true when nothing is outstanding, when the gate
// allowed this repair, or when its budget and quiet allow it now. A write
// it refuses waits for the gate's timer, which makes it when due.
func (g *repairGate) mayWrite() bool {
	if !g.outstanding() || g.granted {
		return true
	}
	if _, dec := g.policy.Due(g.log, g.clock.Now()); dec.Repair {
		return true
	}
	g.deferred = true
	return false
}

// due answers the gate's timer: repair is true when the deferred repair is
// due now and the level still wants it (enabled). A level that does not
// drops the timer's claim; a write it allows later asks mayWrite.
func (g *repairGate) due(enabled bool) (repair bool, fc fightChange) {
	now := g.clock.Now()
	var dec repairgate.Decision
	fc = g.step(func(l repairgate.Log) repairgate.Log {
		l, dec = g.policy.Due(l, now)
		return l
	})
	switch {
	case !g.deferred:
		return false, fc
	case !enabled: // disabled since, or holding: no repair is due
		g.deferred = false
		return false, fc
	case !dec.Repair:
		return false, fc // the timer follows the gate; it fires again when due
	}
	g.deferred = false
	return true, fc
}

// repaired records a repair that wrote: it undid every outstanding change.
func (g *repairGate) repaired() {
	g.granted, g.deferred = false, false // whatever waited is undone now
	now := g.clock.Now()
	g.log = g.policy.Repaired(g.log, now)
}

// stood records that a repair found nothing to undo: the other writers put
// back what the controller wants.
func (g *repairGate) stood() {
	g.granted, g.deferred = false, false
	g.log = g.policy.Stood(g.log, g.clock.Now())
}

// reset forgets the writers and the outstanding changes (Run ends, or the
// DaemonSet is deleted); it reports whether that ended a fight. The budget
// stays: repairs it paid for were made.
func (g *repairGate) reset() (ended bool) {
	ended = g.fighting()
	g.log = repairgate.ForgetWriters(g.log)
	g.granted, g.deferred = false, false
	g.next = nextRepair{}
	g.wakeAt.stop()
	return ended
}

// follow arms the timer for the gate's next instant, or disarms it: when
// the deferred repair may be due, else when the first fight may end. A
// repair under way (an action's retry carries it on) needs no timer.
func (g *repairGate) follow() {
	now := g.clock.Now()
	next := g.policy.FightEnds(g.log)
	if g.deferred {
		if _, dec := g.policy.Due(g.log, now); dec.Repair {
			next = now
		} else if next.IsZero() || dec.At.Before(next) {
			next = dec.At
		}
	}
	if next.IsZero() {
		g.wakeAt.stop()
		return
	}
	g.wakeAt.armAt(next)
}

// backoffNote says, for the log, why a repair waits: what the budget holds
// and who undid the controller's repairs.
func (g *repairGate) backoffNote() string {
	now := g.clock.Now()
	var undid []string
	for _, w := range g.log.Writers() {
		if len(w.Undos) > 0 {
			undid = append(undid, fmt.Sprintf("%s undid %d", w.Name, len(w.Undos)))
		}
	}
	note := fmt.Sprintf("%d of %d repairs left in the budget", g.policy.Available(g.log, now), g.policy.Burst)
	if len(undid) > 0 {
		note += "; " + strings.Join(undid, ", ")
	}
	return note
}

// waiting is the repair the budget holds back, for status: whose change
// waits and until when; nil when none does, only quiet, or the wait ends
// within the status writer's spacing (StatusMaxDelay): it could not be shown
// before it ended, and would cost two status writes for nothing.
func (g *repairGate) waiting() *status.RepairWait {
	now := g.clock.Now()
	if !g.deferred || !g.policy.BudgetAllows(g.log, 1).After(now) {
		return nil
	}
	_, dec := g.policy.Due(g.log, now)
	if dec.At.Sub(now) < StatusMaxDelay {
		return nil
	}
	w := &status.RepairWait{At: dec.At}
	for _, wr := range g.log.Writers() {
		if wr.Outstanding {
			w.Writers = append(w.Writers, wr.Name)
		}
	}
	return w
}

// conflict is the fights for status, nil when there is none: every
// fighting writer with its undos, over the longest of their fights.
func (g *repairGate) conflict() *status.ConflictingWriter {
	now := g.clock.Now()
	var out *status.ConflictingWriter
	for _, w := range g.log.Writers() {
		if !w.Fight {
			continue
		}
		if out == nil {
			out = &status.ConflictingWriter{RepairEvery: g.policy.Every}
		}
		out.Repairs += w.FightUndos
		out.For = max(out.For, now.Sub(w.FightSince))
		out.Writers = append(out.Writers, status.WriterCount{Manager: w.Name, Repairs: w.FightUndos})
	}
	if out != nil {
		slices.SortFunc(out.Writers, func(a, b status.WriterCount) int {
			return cmp.Or(cmp.Compare(b.Repairs, a.Repairs), cmp.Compare(a.Manager, b.Manager))
		})
	}
	return out
}
