// The repair gate's rules: when the controller repairs someone else's
// change of the DaemonSet. Every function takes the gate's log, what
// happened and the current time, and returns the new log and a decision.
//
// A repair rolls a privileged pod on every node, and so does the change it
// undoes. One repair of a human's edit must be immediate; a writer that
// undoes every repair (another copy of the controller with another manifest,
// a GitOps tool that self-heals the same object) must not make the
// controller roll the fleet without bound. Two rules do that.
//
// The budget. Repairs draw on one budget shared by every writer: Burst
// repairs at once, and one more per Every. It is a token bucket (the
// generic cell rate algorithm: one instant, no counters), so in any window
// of length T the repairs made are at most Burst + ⌈T / Every⌉ — the bound
// Policy.Bound states and the tests check on random writer patterns. No
// writer adds to it: not a new manager name, not a change no managedFields
// entry names, not a drain that carries many names. The controller's own
// config, version and TLS writes are not repairs and do not draw on it.
//
// The order inside it. A change by a writer that has undone none of the
// controller's repairs (a first edit, a human's correction) is repaired at
// once while any of the budget is left. A change by a writer that has
// undone a repair of its own earlier change waits until the writers have
// been quiet for Settle, or at most MaxDefer since the first change the
// repair would undo: so a writer still writing is not chased write by
// write, and its last change is undone within seconds of its stopping.
// Nothing else holds a repair back: the budget is spent as fast as B(T)
// allows, whoever the writers are. The verdict below reports; it does not
// delay.
//
// The fight. A writer is in a tug-of-war with the controller when, by any
// rhythm:
//   - it undid FightUndos repairs within FightWindow (a controller or a
//     GitOps tool that writes back at once, or every few minutes);
//   - named writers, whoever they are, undid SlowUndos repairs within
//     SlowWindow, and it is one of them (a writer that rotates its
//     manager name, or a job that writes back every ten minutes);
//   - its change finds the budget spent: repairs have reached B(T),
//     whoever the writers are (a loop that deletes the DaemonSet).
//
// A change no managedFields entry names (a deletion) is nobody in
// particular: unrelated deletions minutes apart are not one writer's undos,
// so they make a fight only by reaching the budget. The fight ends when
// its writer has undone nothing for twice its slowest rhythm (the longest
// gap between its recent undos), at least FightClearMin and at most
// FightWindow, and no change of its is outstanding: a periodic writer stays
// reported between its syncs, and a writer that stopped is cleared a few
// minutes later.

package core

import (
	"slices"
	"time"
)

// Policy is the gate's rules; DefaultPolicy gives the numbers and the
// reasons for them.
type Policy struct {
	// Burst is how many repairs the budget allows at once.
	Burst int
	// Every is how often the budget allows one more repair.
	Every time.Duration
	// Settle is how long the writers of an outstanding change must have been
	// quiet for its deferred repair.
	Settle time.Duration
	// MaxDefer bounds the wait for quiet after the first outstanding change.
	MaxDefer time.Duration
	// FightUndos undos within FightWindow make a writer a fight.
	FightUndos  int
	FightWindow time.Duration
	// SlowUndos undos by named writers within SlowWindow make each of
	// them a fight.
	SlowUndos  int
	SlowWindow time.Duration
	// FightClearMin is the least time a fight's writer must have undone
	// nothing for the fight to end.
	FightClearMin time.Duration
}

// DefaultPolicy is the policy the controller runs with. Why these numbers:
//   - Burst 6, one more a minute: an isolated edit, a correction and
//     another writer's edit during a fight are all undone at once; a writer
//     that undoes every repair gets one a minute, about 10 template writes
//     in a 5-minute fight, against 150 with a writer every 2 s and no gate.
//   - Settle 2 s: the clients that write in storms (a script of kubectl
//     patch, a controller's retries) write within a second of each other;
//     a storm's last change is undone about 2 s after it ends, so within 5 s
//     while the budget allows.
//   - MaxDefer 25 s: a writer that never pauses for Settle is still
//     repaired while the budget allows, and its undos counted: a script's
//     storm (20 s of kubectl patch) is over within it, so it costs one
//     repair, not two; a writer that goes on longer is likely a controller
//     that writes on a timer, and its third undo, which reports it, comes
//     within a minute of its first write (two MaxDefers and a write).
//   - FightUndos 3 within FightWindow 15 minutes: one undo is a human's
//     second try, two can be a retry; three is a writer that will go on. 15
//     minutes catches a GitOps tool's periodic sync (Argo CD's self-heal
//     every 3 minutes by default; 5 is common) by its third sync.
//   - SlowUndos 6 within SlowWindow 1 hour: a writer that escapes the
//     15-minute window by its period (a 10-minute CronJob) or by rotating
//     its name is reported within the hour; 6 rolls an hour is the most
//     such writers get unreported, and an admin's run of edits (a few
//     undos in minutes) stays well below it.
//   - FightClearMin 2 minutes: longer than the budget's one-a-minute repair
//     of a writer that reacts at once, so a fight is not cleared between two
//     of its undos; it clears about 2 minutes after such a writer stops.
func DefaultPolicy() Policy {
	return Policy{
		Burst:         6,
		Every:         time.Minute,
		Settle:        2 * time.Second,
		MaxDefer:      25 * time.Second,
		FightUndos:    3,
		FightWindow:   15 * time.Minute,
		SlowUndos:     6,
		SlowWindow:    time.Hour,
		FightClearMin: 2 * time.Minute,
	}
}

// Valid reports whether p's numbers make a gate: a budget of at least one
// repair, replenished; windows that hold the undos they count.
func (p Policy) Valid() bool {
	return p.Burst >= 1 && p.Every > 0 && p.Settle >= 0 &&
		p.MaxDefer >= p.Settle && p.FightUndos >= 2 && p.FightUndos <= undoTimes && p.FightWindow > 0 && p.FightClearMin > 0 &&
		p.SlowUndos >= 1 && p.SlowUndos <= slowTimes && p.SlowWindow >= p.FightWindow
}

// Bound is the most repairs the budget allows in any window of length d
// (closed at both ends): Burst + ⌈d / Every⌉.
func (p Policy) Bound(d time.Duration) int {
	return p.Burst + int((d+p.Every-1)/p.Every)
}

// Bounds on what the log holds, whatever the writers do: a client chooses
// its manager name, so one that churns names must not grow the log.
const (
	// MaxNamedWriters is how many writers the log keeps apart; the changes
	// of any further ones count as those of OtherWriters.
	MaxNamedWriters = 5
	// OtherWriters is the writer that stands for all writers beyond
	// MaxNamedWriters.
	OtherWriters = "other writers"
	// Unnamed is the writer of a change no managedFields entry names (a
	// deletion, an update that cleared managedFields).
	Unnamed = "a writer managedFields does not name"
	// undoTimes is how many undo times a writer keeps: enough to tell a fight
	// (FightUndos) and its rhythm.
	undoTimes = 4
	// slowTimes is how many undo times of named writers the log keeps for
	// SlowUndos.
	slowTimes = 8
)

// Log is what the gate remembers: the budget and a bounded record of recent
// writers. The zero Log is a gate with its whole budget and no writers.
// Values are independent: the functions below never modify their argument.
type Log struct {
	// budgetAt is the budget's theoretical arrival time: k repairs are
	// available at t when t ≥ budgetAt - (Burst-k)·Every (all of them once
	// t ≥ budgetAt). Each repair moves it Every later, from now at the
	// earliest.
	budgetAt time.Time
	// writers, sorted by name; at most MaxNamedWriters named ones, plus
	// OtherWriters and Unnamed.
	writers []Writer
	// since and last are the first and latest outstanding change; zero
	// when nothing is outstanding.
	since, last time.Time
	// undos are the latest undo times of named writers, whoever they
	// were, oldest first (at most slowTimes).
	undos []time.Time
}

// Writer is the gate's record of one writer.
type Writer struct {
	Name string
	// Outstanding: it changed the DaemonSet and no repair undid it yet.
	Outstanding bool
	// Repaired: the controller's latest repair undid its change and, as far
	// as the gate knows, stands: its next change is an undo.
	Repaired bool
	// LastChange is its latest change.
	LastChange time.Time
	// Undos are its latest undo times, oldest first (at most undoTimes).
	Undos []time.Time
	// Fight: it is in a tug-of-war with the controller since FightSince.
	Fight      bool
	FightSince time.Time
	// FightUndos counts its undos since the fight began.
	FightUndos int
}

// Decision is the gate's answer: repair now, or not before At (zero At:
// nothing to repair).
type Decision struct {
	Repair bool
	At     time.Time
}

// Outstanding reports whether some writer's change waits for a repair.
func (l Log) Outstanding() bool { return !l.since.IsZero() }

// Writers are the writers the log keeps, sorted by name (copies).
func (l Log) Writers() []Writer {
	out := slices.Clone(l.writers)
	for i := range out {
		out[i].Undos = slices.Clone(out[i].Undos)
	}
	return out
}

// Fighting reports whether some writer is in a tug-of-war.
func (l Log) Fighting() bool {
	return slices.ContainsFunc(l.writers, func(w Writer) bool { return w.Fight })
}

// Available is how many repairs the budget allows at now: k while now is
// after budgetAt - (Burst-k+1)·Every. That is B(T) exactly: Burst repairs
// at one instant, and one more within any instant after them and every
// Every after that.
func (p Policy) Available(l Log, now time.Time) int {
	if !l.budgetAt.After(now) {
		return p.Burst
	}
	owed := int(l.budgetAt.Sub(now) / p.Every) // ⌊(budgetAt - now) / Every⌋
	return max(0, p.Burst-owed)
}

// BudgetAllows is when the budget holds k repairs (in the past when it
// does now): the first instant after budgetAt - (Burst-k+1)·Every.
func (p Policy) BudgetAllows(l Log, k int) time.Time {
	return l.budgetAt.Add(-time.Duration(p.Burst-k+1)*p.Every + 1)
}

// clone copies l deeply enough for the functions below to change it.
func (l Log) clone() Log {
	l.writers = slices.Clone(l.writers)
	for i := range l.writers {
		l.writers[i].Undos = slices.Clone(l.writers[i].Undos)
	}
	l.undos = slices.Clone(l.undos)
	return l
}

// Changed records a change by names (empty, or "": Unnamed) at now, and
// decides its repair. The decision is this change's: a writer that has
// undone nothing gets an immediate repair while the budget allows one,
// even while another writer's repair waits (that repair undoes both).
func (p Policy) Changed(l Log, names []string, now time.Time) (Log, Decision) {
	l = p.expire(l.clone(), now)
	if len(names) == 0 {
		names = []string{Unnamed}
	}
	spent := p.Available(l, now) == 0
	contested := false
	for _, n := range names {
		i := l.writerIndex(n)
		w := &l.writers[i]
		if w.Repaired { // it undoes the controller's repair of its last change
			w.Undos = keepLast(append(w.Undos, now), undoTimes)
			if w.Fight {
				w.FightUndos++
			}
			if w.Name != Unnamed {
				l.undos = keepLast(append(l.undos, now), slowTimes)
				if p.undosWithin(*w, now) >= p.FightUndos {
					p.fight(w, w.Undos[len(w.Undos)-p.FightUndos])
				}
			}
		}
		if spent {
			p.fight(w, now)
		}
		w.Outstanding, w.Repaired, w.LastChange = true, false, now
		contested = contested || p.undosWithin(*w, now) > 0
	}
	if p.slowUndos(l, now) >= p.SlowUndos {
		for i := range l.writers {
			if w := &l.writers[i]; w.Name != Unnamed && p.undosIn(*w, now, p.SlowWindow) > 0 {
				p.fight(w, w.Undos[len(w.Undos)-p.undosIn(*w, now, p.SlowWindow)])
			}
		}
	}
	if l.since.IsZero() {
		l.since = now
	}
	l.last = now
	return l, p.decide(l, contested, now)
}

// fight marks w in a tug-of-war since since, unless it already is; its
// undos since then count as the fight's.
func (p Policy) fight(w *Writer, since time.Time) {
	if w.Fight {
		return
	}
	w.Fight, w.FightSince, w.FightUndos = true, since, 0
	for _, u := range w.Undos {
		if !u.Before(since) {
			w.FightUndos++
		}
	}
}

// Due decides, at now, whether the outstanding repair may be made: the
// loop asks when a decision's At has come.
func (p Policy) Due(l Log, now time.Time) (Log, Decision) {
	l = p.expire(l.clone(), now)
	if !l.Outstanding() {
		return l, Decision{}
	}
	contested := slices.ContainsFunc(l.writers, func(w Writer) bool { return w.Outstanding && p.undosWithin(w, now) > 0 })
	return l, p.decide(l, contested, now)
}

// decide: a repair now, or when it may be made. A change needs one repair
// of the budget; a contested one (some writer of it has undone a repair)
// quiet as well.
func (p Policy) decide(l Log, contested bool, now time.Time) Decision {
	at := p.BudgetAllows(l, 1)
	if contested {
		quiet := l.last.Add(p.Settle)
		if limit := l.since.Add(p.MaxDefer); limit.Before(quiet) {
			quiet = limit
		}
		if quiet.After(at) {
			at = quiet
		}
	}
	if !at.After(now) {
		return Decision{Repair: true}
	}
	return Decision{At: at}
}

// Repaired records a repair made at now: a write that undid every
// outstanding change. It draws one repair from the budget.
func (p Policy) Repaired(l Log, now time.Time) Log {
	l = l.clone()
	if l.budgetAt.Before(now) {
		l.budgetAt = now
	}
	l.budgetAt = l.budgetAt.Add(p.Every)
	for i := range l.writers {
		if w := &l.writers[i]; w.Outstanding {
			w.Outstanding, w.Repaired = false, true
		}
	}
	l.since, l.last = time.Time{}, time.Time{}
	return l
}

// Stood records that at now a repair found nothing to undo: the writers
// put back what the controller wants themselves. Their next change undoes
// nothing of the controller's.
func (p Policy) Stood(l Log, now time.Time) Log {
	l = p.expire(l.clone(), now)
	for i := range l.writers {
		l.writers[i].Outstanding = false
	}
	l.since, l.last = time.Time{}, time.Time{}
	return l
}

// Settled ends, at now, the fights whose writers have stopped (see the
// package comment), and forgets writers with nothing left to tell.
func (p Policy) Settled(l Log, now time.Time) Log { return p.expire(l.clone(), now) }
