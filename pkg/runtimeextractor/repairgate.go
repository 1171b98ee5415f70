package runtimeextractor

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/insights-runtime-extractor/controller/pkg/status"
)

// Repairs of someone else's changes, and the tug-of-war.
//
// A repair rolls a privileged pod on every node, and so does the change it
// undoes. One repair of a human's edit must be immediate; a writer that
// undoes every repair at once (another copy of this controller with another
// manifest, a GitOps tool that self-heals the same object) must not make
// the controller roll the fleet once for each of its writes, forever.
//
// So the repairs of each writer's changes form streaks. A repair made while
// the writer undid the last one within repairQuiet continues its streak, and
// waits repairBackoffBase after the streak's first repair, twice that after
// its second, and so on up to repairBackoffMax: a change made during the
// wait is repaired when it ends. A repair that stands for repairQuiet ends
// the streak: the next one is immediate again. A streak per writer, not one
// for all: a writer whose first change this is has undone nothing, and a
// user's edit must not wait because a GitOps tool fought a minute ago.
//
// A streak is a fight once it has fightMinRepairs repairs spanning
// fightMinSpan: RuntimeExtractorDegraded=True [ConflictingWriter], a Warning
// Event, the conflicting_writer gauge. It ends with its streak.
//
// Why these numbers:
//   - repairBackoffBase 1 s, doubling: a 5 s storm of 20 writes a second is
//     repaired at 0, 1, 3 and 7 s, so its last change is undone 2 s after it
//     ends (within 5 s, as before the backoff); a 10 s storm, 5 s after it.
//   - repairBackoffMax 1 minute: the fleet runs another writer's template for
//     at most a minute after that writer stops, and rolls at most once a
//     minute while it does not (about 11 template writes in a 5-minute fight
//     with a writer every 2 s, against 150 without the backoff).
//   - repairQuiet 1 minute: the writers that fight react to a watch event,
//     within seconds; one that takes longer (a GitOps tool's periodic
//     resync, every 3 minutes by default in Argo CD) gets an immediate
//     repair each time, at most 20 an hour, and is what the repair-rate
//     alert is for. It is also how long Degraded stays after the other
//     writer stops: a repair has to stand for it.
//   - fightMinRepairs 5 over fightMinSpan 30 s: a storm, however fast, is
//     over within the first 4 repairs (7 s); a writer that undid 5 repairs
//     over half a minute is not an accident. With a writer reacting at once,
//     the 6th repair declares it, about 31 s into the streak.
const (
	repairBackoffBase = time.Second
	repairBackoffMax  = time.Minute
	repairQuiet       = time.Minute
	fightMinRepairs   = 5
	fightMinSpan      = 30 * time.Second
)

// RepairBackoff is the repair gate's schedule (see above): a repair made
// within Quiet of the streak's latest one waits Base after the streak's
// first repair, twice that after its second, and so on up to Max.
type RepairBackoff struct {
	Base, Max, Quiet time.Duration
}

// DefaultRepairBackoff is the schedule the controller runs with unless
// WithRepairBackoff changes it: 1 s doubling up to 1 minute, a streak ending
// once its latest repair stood for 1 minute.
var DefaultRepairBackoff = RepairBackoff{Base: repairBackoffBase, Max: repairBackoffMax, Quiet: repairQuiet}

// RepairsWithin is how many repairs one streak can make in d on schedule b:
// the first at once, then one after each wait (the bound a fight's writes
// are held to, in the model and the bench).
func (b RepairBackoff) RepairsWithin(d time.Duration) int {
	n := 1
	for t := b.delay(1); t <= d; t += b.delay(n) {
		n++
	}
	return n
}

// delay is the wait after a streak's n-th repair.
func (b RepairBackoff) delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// pendingRepair describes the drift a repair undoes: what changed and who
// changed it, for the repair's Event, log line and repairs_total.
type pendingRepair struct {
	kinds   []DriftKind
	editors []editor
	unnamed bool // some of it no managedFields entry names
}

// maxStreaks bounds the writers with a streak of their own; the changes of
// any further writer share one streak (otherWriters). A client chooses its
// manager name, so one that churns names gets at most maxStreaks+1 streaks'
// worth of immediate repairs, not one per name.
const maxStreaks = maxFightWriters

// otherWriters keys the streak that the writers beyond maxStreaks share.
const otherWriters = "other writers"

// maxSharedNames bounds the names remembered as sharing that streak.
const maxSharedNames = 100

// repairGate decides when a repair of someone else's change is made: at
// once, or when the backoff allows. Each writer has a streak of its own
// (one managedFields does not name, such as a deletion, counts as one
// writer): a writer that keeps undoing the repairs backs off its own
// repairs, and another writer's first change, or first burst, is repaired
// at once, as if the first had never been. A change is repaired when every
// one of its writers' streaks allows. The gate owns the streaks, the
// deferred repair and its description, and the timer that wakes the loop
// when either is due. It only answers; the loop logs, records Events and
// sets gauges on the answers. Owned by the loop's goroutine.
type repairGate struct {
	clock    clock.Clock
	schedule RepairBackoff
	streaks  map[string]*repairStreak // by writer (streakKey); none until one changes the DaemonSet
	shared   map[string]bool          // writers whose changes count in the shared streak while it lasts
	deferred bool                     // a repair waits for the backoff
	pending  pendingRepair
	timer    loopTimer
}

func newRepairGate(clk clock.Clock, schedule RepairBackoff) *repairGate {
	return &repairGate{clock: clk, schedule: schedule, streaks: map[string]*repairStreak{}, timer: loopTimer{clock: clk}}
}

// backoff is the gate's schedule.
func (g *repairGate) backoff() RepairBackoff { return (&repairStreak{schedule: g.schedule}).backoff() }

// streakKey is the streak a change by manager counts in. A writer sent to
// the shared streak stays there while it lasts: a streak of its own, opened
// once others ended, would start its backoff afresh.
func (g *repairGate) streakKey(manager string) string {
	if _, ok := g.streaks[manager]; ok {
		return manager
	}
	if _, ok := g.streaks[otherWriters]; ok && g.shared[manager] {
		return otherWriters
	}
	if len(g.streaks) < maxStreaks {
		return manager
	}
	if g.shared == nil {
		g.shared = map[string]bool{}
	}
	if len(g.shared) < maxSharedNames { // beyond, a churning name is shared anyway
		g.shared[manager] = true
	}
	return otherWriters
}

// describe adds a drain's drift to the description of the repair to come:
// what is outstanding adds up, so its repair's Event names it all;
// otherwise the drain's drift replaces what an earlier repair undid.
func (g *repairGate) describe(d drain) {
	switch {
	case len(d.kinds) == 0:
	case g.outstanding():
		for _, k := range d.kinds {
			if !slices.Contains(g.pending.kinds, k) {
				g.pending.kinds = append(g.pending.kinds, k)
			}
		}
		g.pending.editors = mergeEditors(g.pending.editors, d.editors)
		g.pending.unnamed = g.pending.unnamed || d.unnamed
	default:
		g.pending = pendingRepair{kinds: slices.Clone(d.kinds), editors: d.editors, unnamed: d.unnamed}
	}
}

// outstanding: someone else changed the DaemonSet, and no write of the
// controller has undone it yet. The next write that changes the DaemonSet
// is its repair, whatever led to it.
func (g *repairGate) outstanding() bool {
	for _, s := range g.streaks {
		if s.undone {
			return true
		}
	}
	return false
}

// fighting: some writer's streak is a declared fight.
func (g *repairGate) fighting() bool {
	for _, s := range g.streaks {
		if s.fight {
			return true
		}
	}
	return false
}

// settle ends the streaks whose latest repair stood for Quiet; ended
// reports that this ended the last fight.
func (g *repairGate) settle(now time.Time) (ended bool) {
	was := g.fighting()
	for k, s := range g.streaks {
		s.settle(now)
		if s.repairs == 0 && !s.undone {
			delete(g.streaks, k)
			if k == otherWriters {
				clear(g.shared)
			}
		}
	}
	return was && !g.fighting()
}

// wait is how long the outstanding changes' repair must wait now: until
// every streak with an undone change allows it.
func (g *repairGate) wait(now time.Time) time.Duration {
	var wait time.Duration
	for _, s := range g.streaks {
		if s.undone {
			wait = max(wait, s.wait(now))
		}
	}
	return wait
}

// changed records someone else's change (d; a hint without observations
// counts as an unnamed one) that the level wants repaired. wait is how long
// its repair must wait (0: repair now): until each of its writers' streaks
// allows; ended, that a fight over by now ended first.
func (g *repairGate) changed(d drain) (wait time.Duration, ended bool) {
	now := g.clock.Now()
	ended = g.settle(now)
	by := map[string][]editor{}
	unnamed := map[string]bool{}
	for _, e := range d.editors {
		k := g.streakKey(e.manager)
		by[k] = append(by[k], e)
	}
	// A change no entry records continues the streak of the object's newest
	// other manager, the likely writer (a writer's second write within a
	// second leaves its entry as it was); without one, the unnamed writer's.
	likely := d.likely
	if len(d.kinds) == 0 || len(d.editors) == 0 && len(likely) == 0 {
		likely = append(likely, "")
	}
	for _, m := range likely {
		k := unnamedWriter
		if m != "" {
			k = g.streakKey(m)
		}
		if _, ok := by[k]; !ok {
			by[k] = nil
		}
		unnamed[k] = true
	}
	for k, editors := range by {
		s := g.streaks[k]
		if s == nil {
			s = &repairStreak{schedule: g.schedule}
			g.streaks[k] = s
		}
		s.changed(now, editors, unnamed[k] && len(editors) == 0)
		wait = max(wait, s.wait(now))
	}
	// Only this change's writers decide: a repair now undoes the changes
	// others wait with as well, and counts in their streaks.
	g.deferred = wait > 0
	return wait, ended
}

// repairing: a repair is made now; nothing waits any more.
func (g *repairGate) repairing() { g.deferred = false }

// backoffNote says, for the log, whose streak makes the repair wait longest:
// its writer, how many of its changes were repaired, and since when.
func (g *repairGate) backoffNote() string {
	now := g.clock.Now()
	var who string
	var longest *repairStreak
	for _, k := range slices.Sorted(maps.Keys(g.streaks)) {
		if s := g.streaks[k]; s.undone && (longest == nil || s.wait(now) > longest.wait(now)) {
			who, longest = k, s
		}
	}
	if longest == nil {
		return "none"
	}
	return fmt.Sprintf("%d repairs of changes by %s undone since %s", longest.repairs, who, longest.first.UTC().Format(time.RFC3339))
}

// holds: a repair waits for the backoff. Whatever re-asserts the level on a
// timer (resync, expectation) must not make it early; the gate's own timer
// makes it when due.
func (g *repairGate) holds() bool { return g.deferred }

// due answers the gate's timer: repair is true when the deferred repair is
// due now and the level still wants it (enabled); ended, that the last
// fight ended, its latest repair having stood long enough.
func (g *repairGate) due(enabled bool) (repair, ended bool) {
	now := g.clock.Now()
	ended = g.settle(now)
	switch {
	case !g.deferred:
		return false, ended
	case !enabled: // disabled since, or holding: no repair is due
		g.deferred = false
		return false, ended
	case g.wait(now) > 0:
		return false, ended // the timer follows the streaks; it fires again when due
	}
	g.deferred = false
	return true, ended
}

// repaired records a repair that wrote: it undid every outstanding change,
// each in its writer's streak. started reports that it made a streak the
// first fight; ended, that an earlier last fight had ended first.
func (g *repairGate) repaired() (started, ended bool) {
	now := g.clock.Now()
	g.deferred = false // whatever waited is undone now
	ended = g.settle(now)
	was := g.fighting()
	for _, s := range g.streaks {
		if s.undone {
			s.repaired(now)
		}
	}
	return !was && g.fighting(), ended
}

// stood records that a repair found nothing to undo: the other writers put
// back what the controller wants.
func (g *repairGate) stood() {
	g.deferred = false
	for _, s := range g.streaks {
		s.stands(g.clock.Now())
	}
}

// reset forgets the streaks (Run ends, or the DaemonSet is deleted); it
// reports whether that ended a fight.
func (g *repairGate) reset() (ended bool) {
	ended = g.fighting()
	clear(g.streaks)
	clear(g.shared)
	g.deferred = false
	g.pending = pendingRepair{}
	g.timer.stop()
	return ended
}

// follow arms the timer for the streaks' next instant, or disarms it: when
// the deferred repair is due (every undone streak allows it), else when the
// first streak may end.
func (g *repairGate) follow() {
	var next time.Time
	for _, s := range g.streaks {
		at, ok := s.next(g.deferred && s.undone)
		switch {
		case !ok:
		case g.deferred && s.undone:
			if at.After(next) {
				next = at // every undone writer's wait
			}
		case !g.deferred && (next.IsZero() || at.Before(next)):
			next = at
		}
	}
	if next.IsZero() {
		g.timer.stop()
		return
	}
	g.timer.armAt(next)
}

// C fires when the deferred repair, or the end of a streak, may be due.
func (g *repairGate) C() <-chan time.Time { return g.timer.C() }

// fired records that C delivered.
func (g *repairGate) fired() { g.timer.fired() }

// conflict is the fights for status, nil when there is none: the repairs of
// every fighting writer, over the longest of their fights.
func (g *repairGate) conflict() *status.ConflictingWriter {
	now := g.clock.Now()
	var out *status.ConflictingWriter
	for _, k := range slices.Sorted(maps.Keys(g.streaks)) {
		c := g.streaks[k].conflict(now)
		if c == nil {
			continue
		}
		if out == nil {
			out = c
			continue
		}
		out.Repairs += c.Repairs
		out.For, out.RepairEvery = max(out.For, c.For), max(out.RepairEvery, c.RepairEvery)
		out.Writers = append(out.Writers, c.Writers...)
	}
	if out != nil {
		slices.SortFunc(out.Writers, func(a, b status.WriterCount) int {
			return cmp.Or(cmp.Compare(b.Repairs, a.Repairs), cmp.Compare(a.Manager, b.Manager))
		})
	}
	return out
}
