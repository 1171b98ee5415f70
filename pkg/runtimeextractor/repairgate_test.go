package runtimeextractor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/insights-runtime-extractor/controller/pkg/status"
	clocktesting "k8s.io/utils/clock/testing"
)

// streakRun plays a repairStreak as the control loop drives it: each change
// by someone else is repaired at once unless the streak defers it, a
// deferred repair is made when its wait ends, and the streak is settled at
// every step.
type streakRun struct {
	s        repairStreak
	deferred bool
	repairs  []time.Duration // when the controller repaired, since the start
	declared time.Duration   // when the fight was declared; -1: never
	ended    time.Duration   // when it ended; -1: never
	t0       time.Time
}

func newStreakRun() *streakRun {
	return &streakRun{declared: -1, ended: -1, t0: time.Unix(1_000_000, 0)}
}

func (r *streakRun) settle(now time.Time) {
	if r.s.settle(now) && r.ended < 0 {
		r.ended = now.Sub(r.t0)
	}
}

func (r *streakRun) repair(now time.Time) {
	r.settle(now)
	if r.s.repaired(now) {
		r.declared = now.Sub(r.t0)
	}
	r.repairs = append(r.repairs, now.Sub(r.t0))
	r.deferred = false
}

// advance runs the streak's timer up to (and including) t.
func (r *streakRun) advance(t time.Duration) {
	for {
		at, ok := r.s.next(r.deferred)
		if !ok || at.Sub(r.t0) > t {
			return
		}
		r.settle(at)
		if r.deferred && r.s.wait(at) == 0 {
			r.repair(at)
		}
	}
}

// change is a change by manager at t: repaired now or deferred.
func (r *streakRun) change(t time.Duration, manager string) {
	r.advance(t)
	now := r.t0.Add(t)
	r.settle(now)
	r.s.changed(now, []editor{{manager: manager, operation: "Update", time: now}}, false)
	if r.s.wait(now) > 0 {
		r.deferred = true
		return
	}
	r.repair(now)
}

// writer changes the DaemonSet every period from 0 until (excluded).
func (r *streakRun) writer(manager string, period, until time.Duration) {
	for t := time.Duration(0); t < until; t += period {
		r.change(t, manager)
	}
}

func TestRepairDelayDoublesToTheCap(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := DefaultRepairBackoff.delay(i + 1); got != w {
			t.Errorf("DefaultRepairBackoff.delay(%d) = %s, want %s", i+1, got, w)
		}
	}
}

// A 5 s storm of 20 writes a second is repaired within 5 s after it ends,
// and is no fight: the figure, and the behaviour before the backoff.
func TestStormIsRepairedSoonAndIsNoFight(t *testing.T) {
	for _, storm := range []struct {
		rate     int
		duration time.Duration
		bound    time.Duration
	}{
		{20, 5 * time.Second, 5 * time.Second},
		{50, 10 * time.Second, 10 * time.Second},
	} {
		t.Run(fmt.Sprintf("%d/s for %s", storm.rate, storm.duration), func(t *testing.T) {
			r := newStreakRun()
			r.writer("storm", time.Second/time.Duration(storm.rate), storm.duration)
			r.advance(storm.duration + 10*time.Minute)
			last := r.repairs[len(r.repairs)-1]
			t.Logf("repairs at %v; the last %s after the storm", r.repairs, last-storm.duration)
			if last > storm.duration+storm.bound {
				t.Errorf("the last change was repaired %s after the storm ended, want within %s", last-storm.duration, storm.bound)
			}
			if r.declared >= 0 {
				t.Errorf("a %s storm was declared a fight at %s", storm.duration, r.declared)
			}
		})
	}
}

// The fight: a writer every 2 s for 5 minutes. At most 15 template
// writes (one per theirs, 150, without the backoff), a fight within a
// minute, the desired state back within the cap once the writer stops, and
// the fight over a quiet period later.
func TestFightIsBoundedDeclaredAndEnds(t *testing.T) {
	const (
		period = 2 * time.Second
		fight  = 5 * time.Minute
	)
	r := newStreakRun()
	r.writer("gitops-fight", period, fight)
	lastChange := fight - period
	r.advance(fight + 10*time.Minute)
	t.Logf("%d repairs at %v against %d changes; fight declared at %s, over at %s", len(r.repairs), r.repairs, int(fight/period), r.declared, r.ended)
	if len(r.repairs) > 15 {
		t.Errorf("%d repairs, want at most 15", len(r.repairs))
	}
	if r.declared < 0 || r.declared > time.Minute {
		t.Errorf("fight declared at %s, want within a minute", r.declared)
	}
	if after := r.repairs[len(r.repairs)-1] - lastChange; after < 0 || after > repairBackoffMax {
		t.Errorf("the last change (at %s) was repaired %s later, want within the cap %s", lastChange, after, repairBackoffMax)
	}
	if r.ended < 0 || r.ended > r.repairs[len(r.repairs)-1]+repairQuiet {
		t.Errorf("the fight ended at %s, want %s after the last repair (%s)", r.ended, repairQuiet, r.repairs[len(r.repairs)-1])
	}
}

// Edits a quiet period apart are each repaired at once: the backoff is for
// a streak, not for a cluster that is edited now and then.
func TestRepairsAQuietPeriodApartAreImmediate(t *testing.T) {
	r := newStreakRun()
	for i := range 5 {
		r.change(time.Duration(i)*(repairQuiet+time.Second), "kubectl-edit")
	}
	for i, at := range r.repairs {
		if want := time.Duration(i) * (repairQuiet + time.Second); at != want {
			t.Errorf("repair %d at %s, want %s (immediate)", i, at, want)
		}
	}
	if r.declared >= 0 {
		t.Errorf("five edits a minute apart were declared a fight")
	}
}

// A change the other writer undid itself ends the wait without a repair:
// the streak can then end.
func TestStreakStandsWhenTheOtherWriterPutsItBack(t *testing.T) {
	r := newStreakRun()
	r.change(0, "x")
	r.change(100*time.Millisecond, "x") // deferred
	if !r.deferred {
		t.Fatal("the second change was not deferred")
	}
	now := r.t0.Add(time.Second)
	r.s.stands(now)
	r.deferred = false
	if at, ok := r.s.next(false); !ok || at != now.Add(repairQuiet) {
		t.Fatalf("next = %s, %t; want the streak's end %s", at, ok, now.Add(repairQuiet))
	}
	if r.s.settle(now.Add(repairQuiet)); r.s.repairs != 0 {
		t.Errorf("the streak did not end a quiet period after it stood")
	}
}

// A client picks its manager name: a fight counts at most maxFightWriters
// of them, and the condition names each with its count, most first.
func TestFightNamesABoundedSetOfWriters(t *testing.T) {
	r := newStreakRun()
	for i := range 200 {
		manager := fmt.Sprintf("churn-%03d", i)
		if i%2 == 0 {
			manager = "gitops-fight"
		}
		r.change(time.Duration(i)*2*time.Second, manager)
	}
	c := r.s.conflict(r.t0.Add(400 * time.Second))
	if c == nil {
		t.Fatal("no fight")
	}
	if len(c.Writers) > maxFightWriters {
		t.Errorf("%d writers named, want at most %d", len(c.Writers), maxFightWriters)
	}
	if c.Writers[0].Manager != "gitops-fight" {
		t.Errorf("first writer %q, want gitops-fight (most repairs)", c.Writers[0].Manager)
	}
	msg := status.Conditions(status.Snapshot{State: "Running", Present: true, Conflict: c})[2].Message
	if !strings.Contains(msg, fmt.Sprintf("gitops-fight (%d)", c.Writers[0].Repairs)) || !strings.Contains(msg, "GitOps") {
		t.Errorf("message %q does not name gitops-fight with its count and the likely causes", msg)
	}
}

// Deletions name no one: the fight says so rather than guess.
func TestUnnamedChangesAreCountedAsSuch(t *testing.T) {
	var s repairStreak
	now := time.Unix(0, 0)
	for i := range 8 {
		at := now.Add(time.Duration(i) * 10 * time.Second)
		s.settle(at)
		s.changed(at, nil, true)
		s.repaired(at)
	}
	c := s.conflict(now.Add(80 * time.Second))
	if c == nil || len(c.Writers) != 1 || c.Writers[0].Manager != unnamedWriter {
		t.Fatalf("conflict %+v, want one unnamed writer", c)
	}
}

// A schedule with no quiet time (WithRepairBackoff, as the bench uses to
// time repairs that start a streak) never makes a repair wait once the last
// one stood; the default makes the next change within a minute wait.
func TestRepairBackoffWithoutQuietNeverWaits(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		name     string
		schedule RepairBackoff
		want     time.Duration
	}{
		{"default", DefaultRepairBackoff, time.Second - 10*time.Millisecond},
		{"no quiet", RepairBackoff{Base: time.Second, Max: time.Minute}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := repairStreak{schedule: tc.schedule}
			s.changed(t0, nil, true)
			s.repaired(t0)
			now := t0.Add(10 * time.Millisecond)
			s.changed(now, nil, true)
			if got := s.wait(now); got != tc.want {
				t.Errorf("wait = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestWithRepairBackoffKeepsTheDefaultForAnInvalidSchedule(t *testing.T) {
	for _, b := range []RepairBackoff{{}, {Base: time.Second, Max: time.Millisecond}, {Base: time.Second, Max: time.Minute, Quiet: -1}} {
		c := &Controller{repairBackoff: DefaultRepairBackoff}
		WithRepairBackoff(b)(c)
		if c.repairBackoff != DefaultRepairBackoff {
			t.Errorf("WithRepairBackoff(%+v) set %+v", b, c.repairBackoff)
		}
	}
}

// gateRun plays the repair gate as the control loop drives it, on a fake
// clock: each change by someone else is described and reported to the gate,
// repaired at once unless the gate defers it, and the gate's timer is
// followed after every step.
type gateRun struct {
	g       *repairGate
	clk     *clocktesting.FakeClock
	t0      time.Time
	repairs []time.Duration // when the controller repaired, since the start
}

func newGateRun() *gateRun {
	t0 := time.Unix(1_000_000, 0)
	clk := clocktesting.NewFakeClock(t0)
	return &gateRun{g: newRepairGate(clk, DefaultRepairBackoff), clk: clk, t0: t0}
}

func (r *gateRun) repair() {
	r.g.repaired()
	r.repairs = append(r.repairs, r.clk.Now().Sub(r.t0))
}

// advance runs the gate's timer up to (and including) t.
func (r *gateRun) advance(t time.Duration) {
	for {
		r.g.follow()
		if !r.g.timer.armed() || r.g.timer.at.Sub(r.t0) > t {
			r.clk.SetTime(r.t0.Add(t))
			return
		}
		r.clk.SetTime(r.g.timer.at)
		r.g.fired()
		if repair, _ := r.g.due(true); repair {
			r.repair()
		}
	}
}

// change is a change at t by manager ("": one managedFields does not name).
func (r *gateRun) change(t time.Duration, manager string) {
	d := drain{kinds: []DriftKind{DriftModified}, unnamed: manager == ""}
	if manager != "" {
		d.editors = []editor{{manager: manager, operation: "Update", time: r.t0.Add(t)}}
	}
	r.changeBy(t, d)
}

// unrecorded is a change at t by manager that its managedFields entry does
// not record (a second write within the same second): manager is only the
// object's newest other manager.
func (r *gateRun) unrecorded(t time.Duration, manager string) {
	r.changeBy(t, drain{kinds: []DriftKind{DriftModified}, unnamed: true, likely: []string{manager}})
}

func (r *gateRun) changeBy(t time.Duration, d drain) {
	r.advance(t)
	r.g.describe(d)
	if wait, _ := r.g.changed(d); wait == 0 {
		r.repair()
	}
}

// undoneAfter is how long after t the first repair at or after t came; -1
// when none did.
func (r *gateRun) undoneAfter(t time.Duration) time.Duration {
	for _, at := range r.repairs {
		if at >= t {
			return at - t
		}
	}
	return -1
}

// A user's few edits, a label removal by another client, and about 50 s
// later a burst by a third client (issue 26, defect 8): the burst is another
// writer's first, and has undone no repair, so it is repaired as if alone,
// its last change within seconds of its end, not after the backoff the
// earlier writers' streak had reached.
func TestAnotherWritersFirstBurstIsRepairedSoon(t *testing.T) {
	r := newGateRun()
	for _, at := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
		r.change(at, "kubectl-set")
	}
	r.change(5*time.Second, "")
	const burstStart, burstEnd = 55 * time.Second, 60 * time.Second
	last := burstStart
	for at := burstStart; at < burstEnd; at += 50 * time.Millisecond {
		r.change(at, "kubectl-patch")
		last = at
	}
	r.advance(2 * time.Minute)
	alone := newGateRun()
	for at := time.Duration(0); at < burstEnd-burstStart; at += 50 * time.Millisecond {
		alone.change(at, "kubectl-patch")
	}
	alone.advance(time.Minute)
	want := alone.undoneAfter(last - burstStart)
	got := r.undoneAfter(last)
	t.Logf("the burst's last change undone %s after it (alone: %s); repairs at %v", got, want, r.repairs)
	if got < 0 || got > want {
		t.Errorf("the burst's last change was undone %s after it, want %s as when the burst is alone", got, want)
	}
}

// One writer that undoes every repair, every 2 s for 5 minutes, is bounded
// by the gate as by its streak: at most 12 repairs against 150 changes.
func TestGateBoundsAFightWithOneWriter(t *testing.T) {
	r := newGateRun()
	for at := time.Duration(0); at < 5*time.Minute; at += 2 * time.Second {
		r.change(at, "gitops-fight")
	}
	r.advance(10 * time.Minute)
	if n := len(r.repairs); n > 12 {
		t.Errorf("%d repairs of 150 changes in a 5-minute fight, want at most 12: %v", n, r.repairs)
	}
	if r.g.conflict() != nil {
		t.Errorf("the fight is still on 5 minutes after the writer stopped")
	}
}

// A storm by one writer at 20 writes a second: the API server keeps
// managedFields times to the second, so only the first write of each second
// names the writer, and the others change nothing it records. They are the
// same writer's streak: repaired at 0, 1, 3 and 7 s as when each is named,
// the last 2 s after the storm.
func TestStormNamedOnceASecondIsOneStreak(t *testing.T) {
	named, partly := newGateRun(), newGateRun()
	for at := time.Duration(0); at < 5*time.Second; at += 50 * time.Millisecond {
		named.change(at, "e2e.test")
		if at%time.Second == 0 {
			partly.change(at, "e2e.test")
		} else {
			partly.unrecorded(at, "e2e.test")
		}
	}
	named.advance(time.Minute)
	partly.advance(time.Minute)
	if fmt.Sprint(partly.repairs) != fmt.Sprint(named.repairs) {
		t.Errorf("repairs at %v, want %v as when every write is named", partly.repairs, named.repairs)
	}
	t.Logf("repairs at %v", partly.repairs)
}

// The default schedule's allowance: the first repair at once, then after 1,
// 2, 4, ... seconds, capped at a minute.
func TestRepairsWithin(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Second, 2}, {2 * time.Second, 2}, {3 * time.Second, 3}, {7 * time.Second, 4},
		{63 * time.Second, 7}, {2 * time.Minute, 7}, {123 * time.Second, 8}, {5 * time.Minute, 10},
	} {
		if got := DefaultRepairBackoff.RepairsWithin(tc.d); got != tc.want {
			t.Errorf("RepairsWithin(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
