package runtimeextractor

// A deterministic, randomized property test of the real controller code.
//
// The simulator plays everything around the controller, one run (seed) on one
// goroutine; the runs of different seeds share nothing and run in parallel:
//   - the API server is fakeapi's object tracker (UIDs, generations, conflicts),
//     plus a reactor that refuses the controller's writes on demand;
//   - the watch is the tracker's watch channel: every server write is held
//     "in flight", tagged with who made it, until the test delivers it;
//   - the informer cache is the controller's own indexer: delivering an event
//     writes the indexer and calls the informer's handlers (onAdd, onUpdate,
//     onDelete), as the shared informer would, so events can lag or coalesce.
//     The informer itself is never started (no factory.Start), so its list and
//     watch calls, and the live probe of a broken watch, never run; the
//     controller's view (the cache minus the objects it knows are gone) is the
//     real one;
//   - Run's select loop is replaced by dispatch, which calls the same handlers
//     (reassert, onVersion, onDrift, onRollout) for a ready source, chosen at
//     random as select would; timers (retry, resync) expire when the test says.
//
//   - the process can restart: a new controller, informer and manager, with no
//     memory, over the cache an initial list fills;
//   - other writers change, add to (a sidecar, a toleration, an arg, with the
//     annotations kept) or replace the DaemonSet, or write back an older owned
//     version annotation; the config can turn invalid;
//   - the DaemonSet controller reports what its world holds: pods that stay
//     unavailable on some nodes, nodes that drop out of the desired count;
//   - time passes for the manager's expectations and the retry timer.
//
// Invariants: while running, a drain never counts a kind as drift without a change
// of that kind by someone else, Running is entered only for the object (UID
// and generation) the last successful apply left, at the desired version, and
// the controller sends at most requestBudget requests between two outside
// stimuli (no hot loop); after the world settles (API healed, every event
// delivered and handled, retries run, rollouts done, no resync), the
// controller's state matches the cluster, the DaemonSet equals the desired
// one exactly (additions count), status and the state metric say nothing the
// cluster contradicts, a freshly started controller reports the same
// conditions, and a resync then writes nothing.

import (
	"flag"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/core"
	"github.com/insights-runtime-extractor/controller/pkg/resources"
	"github.com/insights-runtime-extractor/controller/pkg/status"
)

var (
	propertyRuns = flag.Int("property.runs", 2000, "number of seeds TestPropertyControllerConverges tries (seeds 0..n-1)")
	propertySeed = flag.Int64("property.seed", -1, "run only this seed of TestPropertyControllerConverges and log its story")
)

// propertyMaxSteps bounds the random perturbations of one run.
const propertyMaxSteps = 30

// propertyWorkers is how many seeds run at once. Each run is one goroutine of
// its own (its own API server, informer and controller), and most of a run's
// wall time is the manager's in-call retry backoff (real sleeps, 10 ms and
// up, after a lost race), so overlapping runs saves time without more CPU.
const propertyWorkers = 8

// TestPropertyControllerConverges drives the controller through random
// perturbations and checks the invariants; each kind of violation is reported
// once, with its count and the seed with the shortest story. Seeds 0..n-1 run
// (n = -property.runs, 200 with -short); every run is deterministic in its
// seed, whichever worker runs it.
func TestPropertyControllerConverges(t *testing.T) {
	quietKlog(t)
	first, runs := int64(0), *propertyRuns
	if testing.Short() {
		runs = min(runs, 200)
	}
	if *propertySeed >= 0 {
		first, runs = *propertySeed, 1
	}
	results := make([]runResult, runs)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runs, propertyWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(runs); i = next.Add(1) - 1 {
				results[i] = runSeed(t, first+i)
			}
		}()
	}
	wg.Wait()
	if *propertySeed >= 0 {
		t.Logf("seed %d story:\n%s", first, results[0].story)
	}

	type class struct {
		count int
		first runResult // the shortest story, the lowest seed among equals
	}
	classes := map[string]*class{}
	for _, r := range results {
		if r.aborted != "" {
			t.Errorf("simulation aborted: %s", r.aborted)
			continue
		}
		if r.v == nil {
			continue
		}
		c := classes[r.v.kind]
		if c == nil {
			c = &class{first: r}
			classes[r.v.kind] = c
		}
		c.count++
		if r.lines < c.first.lines {
			c.first = r
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(classes)) {
		c := classes[kind]
		t.Errorf("%s: %d of %d runs; shortest story: seed %d (-property.seed=%d): %s\n%s",
			kind, c.count, runs, c.first.seed, c.first.seed, c.first.v.msg, c.first.story)
	}
}

// runResult is what one seed found: its first violation, if any, and its
// story (kept only when it is needed).
type runResult struct {
	seed    int64
	v       *violation
	lines   int
	story   string
	aborted string // the simulator itself failed (an unexpected error)
}

// simAbort carries a simulator failure out of a run on a worker goroutine,
// where t.Fatal must not be called.
type simAbort struct{ msg string }

// runSeed runs one seed on the calling goroutine. A panic (of the simulator or
// of the controller) ends only this run, reported with its seed.
func runSeed(t testing.TB, seed int64) (r runResult) {
	r.seed = seed
	defer func() {
		switch p := recover().(type) {
		case nil:
		case simAbort:
			r.aborted = p.msg
		default:
			r.aborted = fmt.Sprintf("seed %d (-property.seed=%d): panic: %v\n%s", seed, seed, p, debug.Stack())
		}
	}()
	s := newPropSim(t, seed, func(msg string) { panic(simAbort{msg}) })
	defer s.close()
	s.runRandom()
	if len(s.violations) > 0 || *propertySeed >= 0 {
		r.lines, r.story = len(s.log), s.story()
	}
	if len(s.violations) > 0 {
		r.v = &s.violations[0]
	}
	return r
}

// TestPropertyRemovedLabelIsRestoredWithoutResync: someone removes the managed-by label
// (same UID, same generation). The informer queues a DriftMetadata observation;
// onDrift used to drop it because IsOwnWrite(uid, generation) holds for any
// generation not newer than the controller's last write. The label must be
// restored without a resync.
func TestPropertyRemovedLabelIsRestoredWithoutResync(t *testing.T) {
	s := newSettledSim(t)
	s.removeLabel(resources.LabelManagedBy)
	s.deliverAllThen(wakeDrift)
	s.settleAndReport()
}

// TestPropertyOldGenerationStatusDoesNotCompleteRefusedUpgrade: Running at generation 1, the
// version changes, the API refuses the upgrade, and a status-only update of the
// old generation arrives. It used to complete the "upgrade": Upgrading ->
// Running on RolloutComplete(gen=1) with the new version never applied. Once
// the API heals, the upgrade must go through.
func TestPropertyOldGenerationStatusDoesNotCompleteRefusedUpgrade(t *testing.T) {
	s := newSettledSim(t)
	s.setRefused("update", true)
	s.bumpVersion()
	s.dispatch(wakeVersion)
	s.statusNoise(false)
	s.deliverAllThen(wakeRollout)
	s.settleAndReport()
}

// TestPropertyReenableBeforeOwnDeleteIsSeenCreates: disable, then enable again
// before the informer has seen the controller's own DELETE. The cache still
// shows the deleted object; Apply used to adopt it as already desired and the
// post-apply check found it rolled out: Running with no DaemonSet on the
// server, and the late delete event was reported as someone else's drift.
func TestPropertyReenableBeforeOwnDeleteIsSeenCreates(t *testing.T) {
	s := newSettledSim(t)
	s.reenableBeforeOwnDeleteIsSeen()
	s.deliverAllThen(wakeDrift)
	s.settleAndReport()
}

// TestPropertyOwnDeleteOfUncachedObject is defect 4 for an object the cache has
// not shown yet (found by TestPropertyControllerConverges): the controller
// creates the DaemonSet and, before its Added event arrives, is disabled and
// deletes it (the manager owns it, so a DELETE is sent although the view shows
// nothing). The late Added and status events used to bring the deleted object
// into the view, and re-enabling adopted it as already desired and rolled out:
// Running with no DaemonSet on the server, and the late delete event reported
// as someone else's drift.
func TestPropertyOwnDeleteOfUncachedObject(t *testing.T) {
	s := newScriptedSim(t, true) // creates the DaemonSet; its Added is in flight
	s.flipConfig()
	s.rollOut()
	s.dispatch(wakeConfig) // deletes it; Added, rolled-out status, Deleted in flight
	s.flipConfig()
	s.deliver(2) // Added and the rolled-out status, not yet the Deleted
	s.quiet()
	s.dispatch(wakeConfig)
	s.deliverAllThen(wakeDrift)
	s.settleAndReport()
}

// TestPropertyHeldConfigAndVersionSignalsActOnBoth (found by the model once
// it drove the real loop): disabled, a version signal is acted on; a config
// change that enables, then another version change, follow within the front
// door's quiet spell, so the door holds both and acts on them as one. It used
// to act on the version alone: VersionChanged does nothing in Disabled, so
// the enabled level was never applied.
func TestPropertyHeldConfigAndVersionSignalsActOnBoth(t *testing.T) {
	s := newScriptedSim(t, false)
	s.bumpVersion()
	s.dispatch(wakeVersion)
	s.flipConfig()
	s.dispatch(wakeConfig) // held: within core.LevelQuiet of the last action
	s.bumpVersion()
	s.dispatch(wakeVersion) // held with it
	if s.c.core.Queued() != core.SignalConfig|core.SignalVersion {
		t.Fatalf("the front door holds %b, want config and version", s.c.core.Queued())
	}
	s.timerDue()
	s.dispatch(wakeAlarm)
	if s.stored() == nil {
		t.Errorf("enabled, but the merged signals created no DaemonSet\n%s", s.story())
	}
	s.settleAndReport()
}

// TestPropertyTimerDoesNotRepairBeforeTheGate (found by the model once it
// drove the real loop): in a fight, the expectation timer comes due while
// someone else's change waits, queued by the informer, for the loop. A timer
// re-assert used to repair it at once, before the repair gate heard of it: 4
// writes in a 4-change fight over 6 s, where the backoff allows 3. (Then
// the simulation took ready sources in name order, "expectation timer"
// before "resource modified"; now it takes them as Run's scheduler does,
// drift first, and the fix stands on its own in the timer's path.)
func TestPropertyTimerDoesNotRepairBeforeTheGate(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	s.fight(4)
	s.report()
}

// TestPropertyFightIsBounded is the fight in the model: a writer
// every 2 s for 5 minutes of simulated time. The controller writes at most
// 15 times (the random runs check the backoff's bound on every fight), says
// Degraded ConflictingWriter and sets the gauge while it lasts, and once the
// writer stops converges, clears both, and agrees with a fresh replica.
func TestPropertyFightIsBounded(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	writes := s.controllerWrites
	s.fight(150)
	got := s.controllerWrites - writes
	t.Logf("the controller wrote %d times against 150 changes over %s", got, 149*fightPeriod)
	if got > 15 {
		t.Errorf("%d controller writes in the fight, want at most 15", got)
	}
	deg := status.Conditions(s.c.snapshot())[2]
	if deg.Reason != status.ReasonConflictingWriter || !strings.Contains(deg.Message, core.Unnamed) {
		t.Errorf("Degraded during the fight: %s %s: %s; want ConflictingWriter naming %q", deg.Status, deg.Reason, deg.Message, core.Unnamed)
	}
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 1 {
		t.Errorf("conflicting_writer = %v during the fight, want 1", v)
	}
	if evs := s.events.with(ReasonConflictingWriter); len(evs) != 1 || evs[0].eventType != "Warning" || !strings.HasPrefix(evs[0].text, "another writer keeps undoing") || !strings.Contains(evs[0].text, core.Unnamed) {
		t.Errorf("%d %s Events (%+v), want one Warning naming the writer, as Degraded does, at the fight's start", len(evs), ReasonConflictingWriter, evs)
	}
	s.settleAndReport()
	if deg := status.Conditions(s.c.snapshot())[2]; deg.Status != "False" {
		t.Errorf("Degraded after the fight: %s %s: %s", deg.Status, deg.Reason, deg.Message)
	}
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 0 {
		t.Errorf("conflicting_writer = %v after the fight, want 0", v)
	}
}

// TestPropertyRetriedRepairEndsTheFight (issue 26, defect 1): a fight while
// the controller is Deploying (never rolled out), then the repair of one more
// change fails and is retried after the other writer stopped. The retry's
// apply re-asserts the level, not a Modified event, and used not to count as
// a repair: the streak kept its undone change, no timer was armed, and
// Degraded ConflictingWriter stayed on with no one writing.
func TestPropertyRetriedRepairEndsTheFight(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToQuiet() // created, not rolled out: Deploying
	s.fightWithAFailedRepair()
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 1 {
		t.Fatalf("conflicting_writer = %v after the fight, want 1 (Degraded says the failing apply first)\n%s", v, s.story())
	}
	if !s.c.core.RetryPending() {
		t.Fatalf("the repair's apply did not fail into a retry\n%s", s.story())
	}
	s.settleAndReport()
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 0 {
		t.Errorf("conflicting_writer = %v once the other writer stopped, want 0", v)
	}
}

// TestPropertyConfigApplyWhileDriftedIsNoRepair (issue 26, defect 2): a
// repair leaves the controller Drifted until the repair's rollout is
// observed. An insights-config change applied meanwhile undoes no one's
// change, yet used to count as a repair of the earlier writer's.
func TestPropertyConfigApplyWhileDriftedIsNoRepair(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	s.changeSpecExternally()
	s.runToQuiet()
	if st := s.c.State(); st != fsm.StateDrifted {
		t.Fatalf("state %s after the repair, want Drifted\n%s", st, s.story())
	}
	repairs := s.repairsCounted()
	s.changePriorityClass()
	s.runThroughDoor()
	if got := s.stored().Spec.Template.Spec.PriorityClassName; got != s.cfg.priority {
		t.Fatalf("priority class %q, want %q\n%s", got, s.cfg.priority, s.story())
	}
	if n := s.repairsCounted() - repairs; n != 0 {
		t.Errorf("repairs_total rose by %v for insights-config's apply", n)
	}
	s.settleAndReport()
}

// TestPropertyRelistReplacesRolledOutObject (found by
// TestPropertyControllerConverges): disable, then enable again before the
// informer has seen the controller's own DELETE; the controller creates a new
// object, which rolls out. The watch breaks and re-lists: the cache jumps from
// the old object to the new one in one update, with the same generation and
// the same (rolled-out) status. The controller, Deploying the new object, must
// still learn that its rollout is complete.
func TestPropertyRelistReplacesRolledOutObject(t *testing.T) {
	s := newSettledSim(t)
	s.reenableBeforeOwnDeleteIsSeen() // a new object; its Added in flight
	s.rollOut()
	s.relist()
	s.settleAndReport()
}

// reenableBeforeOwnDeleteIsSeen disables the runtime extractor, so that the
// controller deletes the DaemonSet, and enables it again before the informer
// has seen that DELETE.
func (s *propSim) reenableBeforeOwnDeleteIsSeen() {
	s.flipConfig()
	s.dispatch(wakeConfig) // deletes it; Deleted in flight
	s.flipConfig()
	s.quiet() // past the front door's quiet spell: acted on at once
	s.dispatch(wakeConfig)
}

// deliverAllThen delivers every event in flight, then handles w, which they
// made ready.
func (s *propSim) deliverAllThen(w wake) {
	s.deliver(len(s.inFlight))
	s.dispatch(w)
}

// runToRolledOut runs the controller until it is quiet, rolls out what it
// wrote, and runs it until it is quiet again.
func (s *propSim) runToRolledOut() {
	s.runToQuiet()
	s.rollOut()
	s.runToQuiet()
}

// quiet lets the front door's quiet spell pass, so that the next level
// signal is acted on at once rather than held.
func (s *propSim) quiet() {
	s.advanceTo(s.clock.Now().Add(core.LevelQuiet), "the end of the front door's quiet spell")
}

// newScriptedSim starts a simulator for a fixed sequence of steps, with the
// controller's klog output silenced.
func newScriptedSim(t *testing.T, enabled bool) *propSim {
	t.Helper()
	quietKlog(t)
	s := newPropSim(t, 0, func(msg string) { t.Helper(); t.Fatal(msg) })
	t.Cleanup(s.close)
	s.start(enabled, initialNone)
	return s
}

// newSettledSim starts a scripted simulator, enabled, and lets the world
// settle: the DaemonSet created and rolled out, every event handled.
func newSettledSim(t *testing.T) *propSim {
	t.Helper()
	s := newScriptedSim(t, true)
	s.settle()
	return s
}

// report fails a scripted test with every violation it saw and the story.
func (s *propSim) report() {
	s.t.Helper()
	for _, v := range s.violations {
		s.t.Errorf("%s: %s", v.kind, v.msg)
	}
	if len(s.violations) > 0 {
		s.t.Logf("story:\n%s", s.story())
	}
}

// settleAndReport settles the world, checks the final invariants, and fails
// the test with every violation seen.
func (s *propSim) settleAndReport() {
	s.settleAndCheck()
	s.report()
}

// quietKlog silences the controller's klog output, which would bury the story.
func quietKlog(t *testing.T) {
	klog.SetLogger(logr.Discard())
	t.Cleanup(klog.ClearLogger)
}

// TestPropertyRepairWithALostResponseIsCounted: the repair's write is made,
// and its response lost. The controller cannot tell whether it wrote; its
// retry then finds nothing to change. The write was a repair all the same,
// and the repair budget must have paid for it: else a writer whose changes
// meet a flaky connection is repaired without bound.
func TestPropertyRepairWithALostResponseIsCounted(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	s.lostRepairResponse()
	s.settleAndReport()
}

// TestPropertyConfigRelistWaitsForTheGate: a writer undoes a repair, so the
// gate defers the next one; then the config informer re-lists, as it does
// after every broken watch (the API server's restart), and the host relays
// the unchanged insights-config. The re-assert used to write at once, a
// repair the gate had not allowed yet: in the outage test, a re-creation
// up to 19.9 s before the gate's schedule.
func TestPropertyConfigRelistWaitsForTheGate(t *testing.T) {
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	s.writeAndRun(0, "someone", "quay.io/someone/else:1")           // repaired at once
	s.writeAndRun(time.Second, "someone", "quay.io/someone/else:2") // undoes the repair: its repair waits
	if !s.c.core.Deferring() {
		t.Fatalf("the gate defers no repair after the writer's changes\n%s", s.story())
	}
	s.configRelisted()
	s.settleAndReport()
}

// TestPropertyVersionChangeWaitsForTheGate (issue 46, escape 3): a writer
// undoes repairs until the budget is spent and the next repair waits; then
// the cluster version changes. The upgrade's apply undoes the writer's
// change too: it is a repair, and used to be made at once, past B(T).
func TestPropertyVersionChangeWaitsForTheGate(t *testing.T) {
	s := repairWaitingForTheBudget(t)
	if msg := status.Conditions(s.c.snapshot())[0].Message; !strings.Contains(msg, "waits for its repair until") {
		t.Errorf("Available does not say that a repair waits: %s", msg)
	}
	s.bumpVersion()
	s.runToQuiet()
	s.settleAndReport()
}

// TestPropertyRefusedDeleteThenReenableWaitsForTheGate (issue 46, escape 4):
// a repair waits for the spent budget; insights-config disables the
// runtime extractor and the API refuses the delete; the gate's timer comes
// while the level is disabled, and drops its claim; insights-config enables
// it again. The apply that follows undoes the writer's change: it used to
// be made at once, before the budget allowed it.
func TestPropertyRefusedDeleteThenReenableWaitsForTheGate(t *testing.T) {
	s := repairWaitingForTheBudget(t)
	s.setRefused("delete", true)
	s.flipConfig()
	s.runThroughDoor()
	s.controller("the repair gate's timer, while disabled", func() {
		at, _ := s.c.core.At(core.PartGate) // as if its deadline had come
		s.c.step(s.ctx, core.Input{Kind: core.InputDeadline, Part: core.PartGate, DueAt: at})
	})
	if s.c.core.Deferring() {
		t.Fatalf("the gate's timer kept its claim while disabled\n%s", s.story())
	}
	s.flipConfig()
	s.runThroughDoor()
	s.settleAndReport()
}

// repairWaitingForTheBudget is a controller that has rolled out and repaired
// a writer's changes until the repair budget is spent: the next repair
// waits for the gate.
func repairWaitingForTheBudget(t *testing.T) *propSim {
	t.Helper()
	s := newScriptedSim(t, true)
	s.runToRolledOut()
	s.fight(10)
	if !s.c.core.Deferring() {
		t.Fatalf("no repair waits for the gate after the fight\n%s", s.story())
	}
	return s
}
