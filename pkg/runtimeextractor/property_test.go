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
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/openshift/library-go/pkg/operator/events"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/insights-runtime-extractor/controller/fsm"
	"github.com/insights-runtime-extractor/controller/pkg/config"
	"github.com/insights-runtime-extractor/controller/pkg/internal/fakeapi"
	"github.com/insights-runtime-extractor/controller/pkg/metrics"
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

// TestPropertyDefect1MetadataDriftDropped: someone removes the managed-by label
// (same UID, same generation). The informer queues a DriftMetadata observation;
// onDrift used to drop it because IsOwnWrite(uid, generation) holds for any
// generation not newer than the controller's last write. The label must be
// restored without a resync.
func TestPropertyDefect1MetadataDriftDropped(t *testing.T) {
	quietKlog(t)
	s := newScriptedSim(t, true)
	s.settle()
	s.removeLabel(resources.LabelManagedBy)
	s.deliver(len(s.inFlight))
	s.dispatch(srcDrift)
	s.settleAndCheck()
	s.report()
}

// TestPropertyDefect3RunningAfterFailedApply: Running at generation 1, the
// version changes, the API refuses the upgrade, and a status-only update of the
// old generation arrives. It used to complete the "upgrade": Upgrading ->
// Running on RolloutComplete(gen=1) with the new version never applied. Once
// the API heals, the upgrade must go through.
func TestPropertyDefect3RunningAfterFailedApply(t *testing.T) {
	quietKlog(t)
	s := newScriptedSim(t, true)
	s.settle()
	s.setRefused("update", true)
	s.bumpVersion()
	s.dispatch(srcVersion)
	s.statusNoise(false)
	s.deliver(len(s.inFlight))
	s.dispatch(srcRollout)
	s.settleAndCheck()
	s.report()
}

// TestPropertyDefect4OwnDeleteAdoptedAsPresent: disable, then enable again
// before the informer has seen the controller's own DELETE. The cache still
// shows the deleted object; Apply used to adopt it as already desired and the
// post-apply check found it rolled out: Running with no DaemonSet on the
// server, and the late delete event was reported as someone else's drift.
func TestPropertyDefect4OwnDeleteAdoptedAsPresent(t *testing.T) {
	quietKlog(t)
	s := newScriptedSim(t, true)
	s.settle()
	s.flipConfig()
	s.dispatch(srcConfig)
	s.flipConfig()
	s.dispatch(srcConfig)
	s.deliver(len(s.inFlight))
	s.dispatch(srcDrift)
	s.settleAndCheck()
	s.report()
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
	quietKlog(t)
	s := newScriptedSim(t, true) // creates the DaemonSet; its Added is in flight
	s.flipConfig()
	s.rollOut()
	s.dispatch(srcConfig) // deletes it; Added, rolled-out status, Deleted in flight
	s.flipConfig()
	s.deliver(2) // Added and the rolled-out status, not yet the Deleted
	s.dispatch(srcConfig)
	s.deliver(len(s.inFlight))
	s.dispatch(srcDrift)
	s.settleAndCheck()
	s.report()
}

// TestPropertyFightIsBounded is the fight in the model: a writer
// every 2 s for 5 minutes of simulated time. The controller writes at most
// 15 times (the random runs check the backoff's bound on every fight), says
// Degraded ConflictingWriter and sets the gauge while it lasts, and once the
// writer stops converges, clears both, and agrees with a fresh replica.
func TestPropertyFightIsBounded(t *testing.T) {
	quietKlog(t)
	s := newScriptedSim(t, true)
	s.runToQuiet()
	s.rollOut()
	s.runToQuiet()
	writes := s.controllerWrites
	s.fight(150)
	got := s.controllerWrites - writes
	t.Logf("the controller wrote %d times against 150 changes over %s", got, 149*fightPeriod)
	if got > 15 {
		t.Errorf("%d controller writes in the fight, want at most 15", got)
	}
	deg := status.Conditions(s.c.snapshot())[2]
	if deg.Reason != status.ReasonConflictingWriter || !strings.Contains(deg.Message, unnamedWriter) {
		t.Errorf("Degraded during the fight: %s %s: %s; want ConflictingWriter naming %q", deg.Status, deg.Reason, deg.Message, unnamedWriter)
	}
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 1 {
		t.Errorf("conflicting_writer = %v during the fight, want 1", v)
	}
	if evs := s.events.with(ReasonConflictingWriter); len(evs) != 1 || evs[0].eventType != "Warning" || !strings.HasPrefix(evs[0].text, "another writer keeps undoing") || !strings.Contains(evs[0].text, unnamedWriter) {
		t.Errorf("%d %s Events (%+v), want one Warning naming the writer, as Degraded does, at the fight's start", len(evs), ReasonConflictingWriter, evs)
	}
	s.settleAndCheck()
	s.report()
	if deg := status.Conditions(s.c.snapshot())[2]; deg.Status != "False" {
		t.Errorf("Degraded after the fight: %s %s: %s", deg.Status, deg.Reason, deg.Message)
	}
	if v := s.gauge("runtime_extractor_conflicting_writer"); v != 0 {
		t.Errorf("conflicting_writer = %v after the fight, want 0", v)
	}
}

// TestPropertyRelistReplacesRolledOutObject (found by
// TestPropertyControllerConverges): disable, then enable again before the
// informer has seen the controller's own DELETE; the controller creates a new
// object, which rolls out. The watch breaks and re-lists: the cache jumps from
// the old object to the new one in one update, with the same generation and
// the same (rolled-out) status. The controller, Deploying the new object, must
// still learn that its rollout is complete.
func TestPropertyRelistReplacesRolledOutObject(t *testing.T) {
	quietKlog(t)
	s := newScriptedSim(t, true)
	s.settle()
	s.flipConfig()
	s.dispatch(srcConfig) // deletes it; Deleted in flight
	s.flipConfig()
	s.dispatch(srcConfig) // creates a new object; Added in flight
	s.rollOut()
	s.relist()
	s.settleAndCheck()
	s.report()
}

// newScriptedSim starts a simulator for a fixed sequence of steps.
func newScriptedSim(t *testing.T, enabled bool) *propSim {
	t.Helper()
	s := newPropSim(t, 0, func(msg string) { t.Helper(); t.Fatal(msg) })
	t.Cleanup(s.close)
	s.start(enabled, initialNone)
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

// quietKlog silences the controller's klog output, which would bury the story.
func quietKlog(t *testing.T) {
	klog.SetLogger(logr.Discard())
	t.Cleanup(klog.ClearLogger)
}

// writer tells who made a server write, so invariants can tell the
// controller's own writes from other actors'.
type writer string

const (
	byController writer = "controller"
	byOther      writer = "someone else"         // a change the controller must undo
	byDaemonSets writer = "daemonset-controller" // status only
)

// watchEvent is a server write on its way to the informer cache.
type watchEvent struct {
	typ watch.EventType
	ds  *appsv1.DaemonSet
	by  writer
}

type violation struct{ kind, msg string }

// observedBy is a drift observation the informer queued and who caused it.
type observedBy struct {
	kind DriftKind
	by   writer
}

// applyRecord is what the controller's last successful apply left: the object
// (UID, generation) and the version it was applied for.
type applyRecord struct {
	uid     types.UID
	gen     int64
	version string
}

// loopSource is one of the channels Run's select loop receives from.
type loopSource string

const (
	srcConfig  loopSource = "config changed"
	srcVersion loopSource = "version changed"
	srcDrift   loopSource = "resource modified"
	srcRollout loopSource = "rollout"
	srcRetry   loopSource = "retry timer"
	srcResync  loopSource = "resync timer"
	srcExpect  loopSource = "expectation timer"
	srcGate    loopSource = "repair gate timer"
	srcDoor    loopSource = "front door timer"
)

// wakes are the loop's wake-ups for the simulator's sources.
var wakes = map[loopSource]wake{
	srcConfig: wakeConfig, srcVersion: wakeVersion, srcDrift: wakeDrift, srcRollout: wakeRollout, srcRetry: wakeRetry,
	srcResync: wakeResync, srcExpect: wakeExpect, srcGate: wakeGate, srcDoor: wakeDoor,
}

// requestBudget bounds the controller's requests, and the handlers it runs,
// between two outside stimuli (a change by someone, a delivered event, time
// passing). One stimulus leads to a few handlers of a few requests each; a
// loop that needs no stimulus to go on (a timer re-armed at zero) runs past
// it, with requests or without.
const requestBudget = 30

// simNodes is how many nodes should run a pod, until one drops out.
const simNodes = 3

// initialObject is what the server holds when the controller starts.
type initialObject int

const (
	initialNone       initialObject = iota
	initialDesired                  // written by a previous incarnation, rolled out
	initialOldVersion               // the same, one release older
)

type propSim struct {
	t     testing.TB
	abort func(msg string) // stops the run on a simulator failure
	seed  int64
	rng   *rand.Rand
	ctx   context.Context

	api     *fakeapi.Server
	watcher watch.Interface
	rec     events.Recorder
	clock   *clocktesting.FakeClock // every timer of the controller
	cfg     *flipConfig
	ver     *settableVersion
	c       *Controller
	ri      *daemonSetInformer
	m       *metrics.Metrics
	events  *eventLog // the Events of the current process
	reg     *prometheus.Registry

	// The DaemonSet controller's world: nodes that should run a pod, and
	// pods among them that stay unavailable.
	nodes, held int32

	sinceStimulus int      // controller requests since the last outside stimulus
	handled       int      // handlers run since the last outside stimulus
	applied       []string // versions the controller applied, oldest first

	refused       map[string]bool // verbs the API refuses to the controller
	inFlight      []watchEvent    // written on the server, not yet in the cache
	configPending bool            // a config notification waits in Run's select
	versionSeq    int
	statusSeq     int

	// Ground truth for the drift invariants: someone else's changes not yet
	// delivered to the cache, and delivered but not yet drained by onDrift;
	// who caused each observation the informer queued; whether a relist
	// swallowed someone else's change whole (then only a resync can know).
	unseenOther, seenOther int
	observed               []observedBy
	lossy                  bool
	lastApply              *applyRecord
	controllerWrites       int

	steps      int
	lines      int
	log        []string
	violations []violation
}

// newPropSim builds a simulator for seed; abort must not return.
func newPropSim(t testing.TB, seed int64, abort func(msg string)) *propSim {
	t.Helper()
	s := &propSim{
		t:       t,
		abort:   abort,
		seed:    seed,
		rng:     rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
		ctx:     context.Background(),
		rec:     newHostRecorder("property"),
		cfg:     &flipConfig{good: true},
		ver:     newSettableVersion("4.21.0"),
		refused: map[string]bool{},
		nodes:   simNodes,
		clock:   clocktesting.NewFakeClock(time.Unix(0, 0)),
	}
	s.api = newPropAPI()
	s.watchAPI()
	s.boot()
	return s
}

// watchAPI puts the simulator between the API server and the controller: a
// reactor that refuses and counts the controller's requests, and the watch.
func (s *propSim) watchAPI() {
	// Prepended last, so it answers first. Other actors' writes bypass it
	// (fakeapi's Create/Update, the tracker).
	s.api.Client.PrependReactor("*", "daemonsets", s.refuse)
	w, err := s.api.Client.Tracker().Watch(fakeapi.DaemonSets, resources.Namespace)
	s.must(err)
	s.watcher = w
}

// boot starts a controller process: a new informer (its factory is never
// started: the test is the watch), resource manager and state machine, with
// no memory of an earlier one.
func (s *propSim) boot() {
	factory := informers.NewSharedInformerFactoryWithOptions(s.api.Client, 0, informers.WithNamespace(resources.Namespace))
	ri, err := NewResourceInformer(s.rec, factory)
	s.must(err)
	s.m = metrics.New()
	s.events = &eventLog{}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(s.m.Collectors()...)
	// The default backoff without its jitter: the order of the timers is the
	// simulation's, the same in every run.
	retries := workqueue.NewTypedItemExponentialFailureRateLimiter[string](DefaultRetryBase, DefaultRetryMax)
	s.c = NewRuntimeExtractorController(s.cfg, nil, nil, s.api.Client, s.rec, ri, WithEventRecorder(s.events),
		WithImages(resources.DefaultImages()), WithVersionSource(s.ver), WithMetrics(s.m), WithClock(s.clock), WithRateLimiter(retries))
	s.c.manager.SetCacheCatchUp(0) // the cache moves only between steps
	s.ri = s.c.informer
	s.c.machine.OnTransition(s.onTransition)
}

// shutdown stops the controller process (not the world), as the end of Run
// does.
func (s *propSim) shutdown() {
	s.c.stop()
	s.ri.syncCtx.Queue().ShutDown()
}

func (s *propSim) close() {
	s.shutdown()
	s.watcher.Stop()
}

// newPropAPI is fakeapi's server on the plain object tracker: the field-managed
// tracker of fake.NewClientset builds a REST mapper on every write, which
// would dominate thousands of runs. fakeapi's Create and Update (UIDs,
// generations, conflicts, defaults) answer the client's create and update,
// and its DeleteReactor the UID precondition of a delete.
func newPropAPI() *fakeapi.Server {
	//lint:ignore SA1019 NewClientset's field-managed tracker is too slow here, see above.
	api := &fakeapi.Server{Client: fake.NewSimpleClientset()}
	api.Client.PrependReactor("create", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		out, err := api.Create(a.(clienttesting.CreateAction).GetObject().(*appsv1.DaemonSet))
		return true, out, err
	})
	api.Client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		out, err := api.Update(a.(clienttesting.UpdateAction).GetObject().(*appsv1.DaemonSet))
		return true, out, err
	})
	api.Client.PrependReactor("delete", "daemonsets", api.DeleteReactor)
	return api
}

// flipConfig is a ConfigNotifier whose DisableRuntimeExtractor the test sets.
// It can turn invalid: the last good value stays, and a process that has seen
// no good config since it started holds (HasGoodConfig).
type flipConfig struct {
	disabled bool // the last good config's
	invalid  bool // the current content is rejected
	good     bool // a good config was seen since the process started
}

func (f *flipConfig) ConfigChanged() (<-chan struct{}, func()) { return nil, func() {} }

func (f *flipConfig) Config() *config.InsightsConfiguration {
	return &config.InsightsConfiguration{DataReporting: config.DataReporting{DisableRuntimeExtractor: f.disabled}}
}

func (f *flipConfig) HasGoodConfig() bool { return f.good }

func (f *flipConfig) LastError() error {
	if f.invalid {
		return errors.New("config.yaml: mapping expected (injected)")
	}
	return nil
}

func (s *propSim) refuse(a clienttesting.Action) (bool, runtime.Object, error) {
	s.sinceStimulus++
	if a.GetSubresource() == "" && s.refused[a.GetVerb()] {
		return true, nil, apierrors.NewServiceUnavailable("injected: " + a.GetVerb() + " refused")
	}
	return false, nil, nil
}

// ---- the run ----

func (s *propSim) runRandom() {
	init := []initialObject{initialNone, initialNone, initialDesired, initialOldVersion}[s.rng.IntN(4)]
	s.start(s.rng.IntN(3) != 0, init)
	for n := s.rng.IntN(propertyMaxSteps + 1); s.steps < n && len(s.violations) == 0; {
		s.randomStep()
	}
	if len(s.violations) == 0 {
		s.settleAndCheck()
	}
}

// start stages the initial cluster, fills the cache as the initial list would,
// and does what Run does before its loop: read the version, re-assert.
func (s *propSim) start(enabled bool, init initialObject) {
	s.cfg.disabled = !enabled
	what := "no DaemonSet"
	if init != initialNone {
		version := s.ver.Version()
		if init == initialOldVersion {
			version = "4.20.0"
		}
		ds := s.previousIncarnation(version)
		idx := s.ri.informer.GetIndexer()
		s.must(idx.Add(ds))
		s.ri.onAdd(ds, true)
		what = "DaemonSet " + describeDS(ds) + " from a previous incarnation"
	}
	s.drainWatch() // the initial state is not an event
	s.inFlight = nil
	s.logf("start: %s, version %s, %s", map[bool]string{true: "enabled", false: "disabled"}[enabled], s.ver.Version(), what)
	s.controller("startup", func() { s.c.start(s.ctx) })
}

// previousIncarnation writes, with a manager of its own, the DaemonSet an
// earlier controller process would have left, rolled out.
func (s *propSim) previousIncarnation(version string) *appsv1.DaemonSet {
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	m := resources.NewManager(s.api.Client, appslisters.NewDaemonSetLister(empty), s.rec, resources.Desired{})
	res, err := m.Apply(s.ctx, resources.Desired{Images: resources.DefaultImages(), Version: version})
	s.must(err)
	ds := res.Object.DeepCopy()
	ds.Status = s.worldStatus(ds.Generation)
	return s.writeStatus(ds)
}

func (s *propSim) randomStep() {
	type step struct {
		weight int
		do     func()
		// consequence: the step plays out an earlier stimulus (handles a
		// ready source, delivers events); it does not renew the budget.
		consequence bool
	}
	steps := []step{
		{3, s.flipConfig, false},
		{2, s.bumpVersion, false},
		{1, s.deleteExternally, false},
		{1, s.changeSpecExternally, false},
		{1, s.addExternally, false},
		{1, s.replaceExternally, false},
		{1, s.revertMetadata, false},
		{1, s.breakConfig, false},
		{1, s.restart, false},
		{1, s.holdPod, false},
		{1, s.dropNode, false},
		{1, s.timePasses, false},
		{1, s.runToQuiet, false},
		{1, func() {
			keys := slices.Sorted(maps.Keys(resources.OwnedLabels()))
			s.removeLabel(keys[s.rng.IntN(len(keys))])
		}, false},
		{1, s.createExternally, false},
		{1, func() { s.fight(2 + s.rng.IntN(40)) }, false},
		{2, s.toggleRefusal, false},
		{2, s.rollOut, false},
		{1, func() { s.statusNoise(s.rng.IntN(2) == 0) }, false},
		{4, func() {
			if len(s.inFlight) > 0 {
				s.deliver(1 + s.rng.IntN(len(s.inFlight)))
			}
		}, true},
		{1, s.relist, false},
		{6, func() {
			if r := s.ready(); len(r) > 0 {
				s.dispatch(r[s.rng.IntN(len(r))])
			}
		}, true},
		{1, func() { s.dispatch(srcResync) }, false},
		{2, func() {
			if s.c.retry.pending() {
				s.advanceTo(s.c.retry.timer.at, "the retry")
				s.dispatch(srcRetry)
			}
		}, false},
	}
	total := 0
	for _, st := range steps {
		total += st.weight
	}
	n := s.rng.IntN(total)
	for _, st := range steps {
		if n < st.weight {
			before := len(s.log)
			if !st.consequence {
				s.stimulus()
			}
			st.do()
			if len(s.log) > before {
				s.steps++
			}
			return
		}
		n -= st.weight
	}
}

// ---- what other actors do ----

func (s *propSim) flipConfig() {
	s.cfg.disabled = !s.cfg.disabled
	s.cfg.invalid, s.cfg.good = false, true
	s.configPending = true
	s.logf("config: runtime extractor %s", map[bool]string{true: "disabled", false: "enabled"}[s.cfg.disabled])
}

// breakConfig makes insights-config invalid: the last good value stays.
func (s *propSim) breakConfig() {
	if s.cfg.invalid {
		return
	}
	s.cfg.invalid = true
	s.configPending = true
	s.logf("config: insights-config turns invalid")
}

// restart is a new controller process: the old one stops (its in-flight
// events die with its watch), the new one lists what the server holds and
// re-asserts, as Run does at start.
func (s *propSim) restart() {
	if s.c != nil {
		s.shutdown()
	}
	s.cfg.good = !s.cfg.invalid
	s.inFlight, s.configPending = nil, false
	s.unseenOther, s.seenOther, s.observed, s.lossy, s.lastApply = 0, 0, nil, false, nil
	s.drainVersionSignal()
	s.boot()
	what := "no DaemonSet"
	if ds := s.stored(); ds != nil {
		s.must(s.ri.informer.GetIndexer().Add(ds))
		s.ri.onAdd(ds, true)
		what = describeDS(ds)
	}
	s.logf("controller restarts (lists %s)", what)
	s.controller("startup", func() { s.c.start(s.ctx) })
}

func (s *propSim) drainVersionSignal() {
	select {
	case <-s.ver.changed:
	default:
	}
}

// timePasses moves the clock past the manager's expectation timeout.
func (s *propSim) timePasses() {
	s.clock.SetTime(s.clock.Now().Add(resources.ExpectationTimeout))
	s.logf("time passes (%s)", resources.ExpectationTimeout)
}

// stimulus marks an outside change: the request budget starts again.
func (s *propSim) stimulus() { s.sinceStimulus, s.handled = 0, 0 }

func (s *propSim) bumpVersion() {
	s.versionSeq++
	v := fmt.Sprintf("4.%d.0", 21+s.versionSeq)
	s.ver.set(v)
	s.logf("cluster version: %s", v)
}

func (s *propSim) toggleRefusal() {
	verbs := []string{"create", "update", "delete"}
	if s.rng.IntN(4) == 0 {
		for _, v := range verbs {
			s.setRefused(v, false)
		}
		return
	}
	v := verbs[s.rng.IntN(len(verbs))]
	s.setRefused(v, !s.refused[v])
}

func (s *propSim) setRefused(verb string, on bool) {
	if s.refused[verb] == on {
		return
	}
	s.refused[verb] = on
	s.logf("api: %s of the DaemonSet %s", verb, map[bool]string{true: "refused", false: "allowed again"}[on])
}

func (s *propSim) deleteExternally() {
	if s.stored() == nil {
		return
	}
	s.must(s.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName))
	s.logf("someone else deletes the DaemonSet")
	s.drainWatchAs(byOther)
}

func (s *propSim) changeSpecExternally() {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	what := "bumps minReadySeconds"
	if s.rng.IntN(2) == 0 {
		what = "changes the extractor image"
		ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	} else {
		ds.Spec.MinReadySeconds++
	}
	_, err := s.api.Update(ds)
	s.must(err)
	s.logf("someone else %s", what)
	s.drainWatchAs(byOther)
}

// fightPeriod is how often the fighting writer changes the DaemonSet.
const fightPeriod = 2 * time.Second

// fight is a writer that keeps changing the DaemonSet's image, one change
// every fightPeriod of simulated time for rounds rounds; between two, every
// event is delivered and the controller runs to quiet (its streak timer
// included). The invariant: the controller's writes during the fight are
// at most the repairs the backoff allows in the simulated time it lasted.
func (s *propSim) fight(rounds int) {
	if s.stored() == nil {
		return
	}
	s.runToQuiet() // what came before plays out first, signals the front door holds too
	for s.c.door.pending != 0 && len(s.violations) == 0 {
		s.advanceTo(s.c.door.timer.at, "the front door's trailing edge")
		s.runToQuiet()
	}
	start, writes := s.clock.Now(), s.controllerWrites
	s.logf("someone else fights: %d changes, one every %s", rounds, fightPeriod)
	for i := range rounds {
		if len(s.violations) > 0 {
			return
		}
		if i > 0 {
			s.clock.SetTime(s.clock.Now().Add(fightPeriod))
		}
		s.stimulus()
		if ds := s.stored(); ds != nil {
			ds = ds.DeepCopy()
			ds.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("quay.io/someone/else:%d", i%2)
			_, err := s.api.Update(ds)
			s.must(err)
			s.drainWatchAs(byOther)
		}
		s.runToQuiet()
	}
	elapsed := s.clock.Now().Sub(start)
	if got, bound := s.controllerWrites-writes, repairsWithin(elapsed); got > bound {
		s.violate("fight-writes", fmt.Sprintf("%d controller writes in a fight of %d changes over %s; the repair backoff allows %d", got, rounds, elapsed, bound))
	}
}

// repairsWithin is how many repairs a streak can make in d: the first at
// once, then one after each wait of the schedule.
func repairsWithin(d time.Duration) int {
	n := 1
	for t := repairDelay(1); t <= d; t += repairDelay(n) {
		n++
	}
	return n
}

// addExternally adds to the spec and keeps every annotation, as a patch
// does: a sidecar container, a toleration or a kube-rbac-proxy argument.
func (s *propSim) addExternally() { s.add(s.rng.IntN(3)) }

// add makes one of addition's changes, which, to the stored DaemonSet.
func (s *propSim) add(which int) {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	what := addition(ds, which)
	_, err := s.api.Update(ds)
	s.must(err)
	s.logf("someone else adds %s", what)
	s.drainWatchAs(byOther)
}

// addition adds one of three things to ds's pod template and names it.
func addition(ds *appsv1.DaemonSet, which int) string {
	pod := &ds.Spec.Template.Spec
	switch which {
	case 0:
		pod.Containers = append(pod.Containers, corev1.Container{Name: "sidecar", Image: "quay.io/someone/sidecar:latest",
			TerminationMessagePath: corev1.TerminationMessagePathDefault})
		return "a sidecar container"
	case 1:
		pod.Tolerations = append(pod.Tolerations, corev1.Toleration{Key: "someone", Operator: corev1.TolerationOpExists})
		return "a toleration"
	default:
		for i := range pod.Containers {
			if pod.Containers[i].Name == resources.ContainerKubeRBACProxy {
				pod.Containers[i].Args = append(pod.Containers[i].Args, "--insecure-listen-address=0.0.0.0:8080")
			}
		}
		return "an argument of kube-rbac-proxy"
	}
}

// replaceExternally deletes the DaemonSet and creates it again (a new UID)
// with the same metadata and an extra toleration.
func (s *propSim) replaceExternally() {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	addition(ds, 1)
	s.must(s.api.Client.Tracker().Delete(fakeapi.DaemonSets, resources.Namespace, resources.DaemonSetName))
	ds.UID, ds.ResourceVersion, ds.Status = "", "", appsv1.DaemonSetStatus{}
	_, err := s.api.Create(ds)
	s.must(err)
	s.logf("someone else replaces the DaemonSet with a copy that has a toleration more")
	s.drainWatchAs(byOther)
}

// revertMetadata writes back the version annotation the controller applied
// before its latest one (a restore, a GitOps sync).
func (s *propSim) revertMetadata() {
	ds := s.stored()
	n := len(s.applied)
	if ds == nil || n < 2 || ds.Annotations[resources.VersionAnnotation] != s.applied[n-1] {
		return
	}
	ds = ds.DeepCopy()
	ds.Annotations[resources.VersionAnnotation] = s.applied[n-2]
	_, err := s.api.Update(ds)
	s.must(err)
	s.logf("someone else sets the version annotation back to %s", s.applied[n-2])
	s.drainWatchAs(byOther)
}

// holdPod makes one pod stay unavailable, or lets it become available.
func (s *propSim) holdPod() {
	s.held = 1 - s.held
	s.logf("world: %d pod(s) stay unavailable", s.held)
	s.rollOut()
}

// dropNode takes a node out of the desired count (tainted unreachable), or
// brings it back.
func (s *propSim) dropNode() {
	if s.nodes == simNodes {
		s.nodes--
	} else {
		s.nodes = simNodes
	}
	s.logf("world: %d node(s) should run a pod", s.nodes)
	s.rollOut()
}

// removeLabel is metadata drift: same UID, same generation.
func (s *propSim) removeLabel(key string) {
	ds := s.stored()
	if ds == nil || ds.Labels[key] == "" {
		return
	}
	ds = ds.DeepCopy()
	delete(ds.Labels, key)
	_, err := s.api.Update(ds)
	s.must(err)
	s.logf("someone else removes label %s", key)
	s.drainWatchAs(byOther)
}

func (s *propSim) createExternally() {
	if s.stored() != nil {
		return
	}
	ds, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: "4.0.0"})
	s.must(err)
	ds.Spec.Template.Spec.Containers[0].Image = "quay.io/someone/else:latest"
	_, err = s.api.Create(ds)
	s.must(err)
	s.logf("someone else creates a DaemonSet of the same name")
	s.drainWatchAs(byOther)
}

// rollOut plays the DaemonSet controller catching up with the current
// generation in its world: every node runs it, held pods unavailable.
func (s *propSim) rollOut() {
	ds := s.stored()
	if ds == nil || !s.statusBehind(ds) {
		return
	}
	ds = ds.DeepCopy()
	ds.Status = s.worldStatus(ds.Generation)
	s.updateStatus(ds, fmt.Sprintf("daemonset controller: generation %%d on %d node(s), %d unavailable", s.nodes, s.held))
}

// statusBehind: the DaemonSet controller has yet to report ds as its world is.
func (s *propSim) statusBehind(ds *appsv1.DaemonSet) bool {
	return ds.DeletionTimestamp == nil && !equality.Semantic.DeepEqual(ds.Status, s.worldStatus(ds.Generation))
}

// worldStatus is what the DaemonSet controller reports for generation gen
// once it has rolled it out on every node of its world.
func (s *propSim) worldStatus(gen int64) appsv1.DaemonSetStatus {
	return appsv1.DaemonSetStatus{
		ObservedGeneration: gen, DesiredNumberScheduled: s.nodes, CurrentNumberScheduled: s.nodes,
		UpdatedNumberScheduled: s.nodes, NumberAvailable: s.nodes - s.held, NumberReady: s.nodes - s.held,
		NumberUnavailable: s.held,
	}
}

// statusNoise is a status-only update: a pod becomes unavailable (dip) or a
// field unrelated to the rollout moves.
func (s *propSim) statusNoise(dip bool) {
	ds := s.stored()
	if ds == nil {
		return
	}
	ds = ds.DeepCopy()
	what := "daemonset controller: status-only update of generation %d (misscheduled count)"
	ds.Status.NumberMisscheduled = 1 - ds.Status.NumberMisscheduled
	if dip && ds.Status.NumberAvailable > 0 {
		what = "daemonset controller: a pod of generation %d becomes unavailable"
		ds.Status.NumberAvailable--
	}
	s.updateStatus(ds, what)
}

func (s *propSim) updateStatus(ds *appsv1.DaemonSet, format string) {
	s.writeStatus(ds)
	s.logf(format, ds.Generation)
	s.drainWatchAs(byDaemonSets)
}

// writeStatus stores ds (only its status differs from the server's) as the
// status subresource would: same spec and generation, a new resourceVersion.
func (s *propSim) writeStatus(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	s.statusSeq++
	ds.ResourceVersion = fmt.Sprintf("status-%d", s.statusSeq)
	s.must(s.api.Client.Tracker().Update(fakeapi.DaemonSets, ds, ds.Namespace))
	return ds
}

// ---- the watch and the cache ----

// drainWatchAs moves the server's new watch events in flight, tagged by.
func (s *propSim) drainWatchAs(by writer) {
	for _, e := range s.drainWatch() {
		ds := e.Object.(*appsv1.DaemonSet)
		s.inFlight = append(s.inFlight, watchEvent{e.Type, ds, by})
		if by == byOther {
			s.unseenOther++
		}
		if by == byController {
			s.controllerWrites++
		}
		s.logf("    server %s %s by %s", strings.ToLower(string(e.Type)), describeDS(ds), by)
	}
}

func (s *propSim) drainWatch() []watch.Event {
	var out []watch.Event
	for {
		select {
		case e := <-s.watcher.ResultChan():
			out = append(out, e)
		default:
			return out
		}
	}
}

// deliver hands the first n events in flight to the informer, as the shared
// informer's processDeltas does: write the indexer, then call the handler.
func (s *propSim) deliver(n int) {
	idx := s.ri.informer.GetIndexer()
	for _, e := range s.inFlight[:n] {
		s.logf("watch delivers %s %s (by %s)", strings.ToLower(string(e.typ)), describeDS(e.ds), e.by)
		queued := len(s.ri.pending)
		if e.typ == watch.Deleted {
			s.must(idx.Delete(e.ds))
			s.ri.onDelete(e.ds)
		} else if old, ok := s.cached(); ok { // the raw cache, as processDeltas reads it
			s.must(idx.Update(e.ds))
			s.ri.onUpdate(old, e.ds)
		} else {
			s.must(idx.Add(e.ds))
			s.ri.onAdd(e.ds, false)
		}
		s.noteObservations(queued, e.by)
		if e.by != byController {
			s.stimulus() // news from outside
		}
		if e.by == byOther {
			s.unseenOther--
			s.seenOther++
		}
	}
	s.inFlight = s.inFlight[n:]
	s.runWorker()
}

// relist is a watch that broke and re-listed: every event in flight coalesces
// into the server's current state (a delete arrives as a tombstone).
func (s *propSim) relist() {
	if len(s.inFlight) == 0 {
		return
	}
	by := byController
	for _, e := range s.inFlight {
		if e.by == byOther {
			by = byOther
			s.unseenOther--
			s.seenOther++
		}
	}
	s.inFlight = nil
	queued := len(s.ri.pending)
	idx := s.ri.informer.GetIndexer()
	srv := s.stored()
	old, cached := s.cached()
	s.logf("watch re-lists: the cache jumps to %s", describeDS(srv))
	switch {
	case srv != nil && cached:
		s.must(idx.Update(srv))
		s.ri.onUpdate(old, srv)
	case srv != nil:
		s.must(idx.Add(srv))
		s.ri.onAdd(srv, false)
	case cached:
		s.must(idx.Delete(old))
		s.ri.onDelete(cache.DeletedFinalStateUnknown{Key: resources.Namespace + "/" + resources.DaemonSetName, Obj: old})
	}
	// Someone else's change may leave no trace, e.g. the deletion of an object
	// the cache never saw: no event will ever tell the controller; only the
	// resync can. The expected deletion of an object the controller deleted
	// itself is no trace either: the controller rightly ignores it.
	if by == byOther && !slices.ContainsFunc(s.ri.pending[queued:], func(o observation) bool { return !o.expected }) {
		s.lossy = true
		s.logf("    (someone else's change left no trace in the cache: lost until a resync)")
	}
	s.noteObservations(queued, by)
	s.runWorker()
}

// noteObservations attributes to by the observations the informer queued
// beyond the first queued ones.
func (s *propSim) noteObservations(queued int, by writer) {
	for _, o := range s.ri.pending[queued:] {
		s.observed = append(s.observed, observedBy{o.kind, by})
	}
}

// runWorker plays the library-go worker: queued drift becomes one
// ResourceModified notification.
func (s *propSim) runWorker() {
	q := s.ri.syncCtx.Queue()
	for q.Len() > 0 {
		key, _ := q.Get()
		s.must(s.ri.sync(s.ctx, s.ri.syncCtx))
		q.Done(key)
	}
}

// ---- the controller's loop ----

// ready lists the sources Run's select could receive from now, the
// periodic resync aside (the simulation runs it as a step of its own). Timers
// that are due deliver first, as the clock would.
func (s *propSim) ready() []loopSource {
	s.clock.SetTime(s.clock.Now())
	var r []loopSource
	if s.configPending {
		r = append(r, srcConfig)
	}
	for src, ch := range map[loopSource]int{
		srcVersion: len(s.ver.changed), srcDrift: len(s.ri.modified), srcRollout: len(s.ri.rollout),
		srcRetry: len(s.c.retry.C()), srcExpect: len(s.c.expect.C()), srcGate: len(s.c.gate.C()), srcDoor: len(s.c.door.C()),
	} {
		if ch > 0 {
			r = append(r, src)
		}
	}
	slices.Sort(r) // map order is random; the simulation's is the seed's
	return r
}

// nextTimer is when the earliest armed timer of the loop fires (the resync
// and the rollout deadline aside: the simulation never waits for those).
func (s *propSim) nextTimer() (time.Time, bool) {
	var at time.Time
	for _, t := range []*loopTimer{&s.c.retry.timer, &s.c.expect, &s.c.gate.timer, &s.c.door.timer} {
		if t.armed() && (at.IsZero() || t.at.Before(at)) {
			at = t.at
		}
	}
	return at, !at.IsZero()
}

// advanceTo moves the clock to at, if it is later: time passing is a
// stimulus.
func (s *propSim) advanceTo(at time.Time, what string) {
	if s.clock.Now().Before(at) {
		s.clock.SetTime(at)
	}
	s.stimulus()
	s.logf("time passes to %s", what)
}

// dispatch is one iteration of Run's select loop for src: it receives what
// Run's case receives, then runs the loop's handler and its tail.
func (s *propSim) dispatch(src loopSource) {
	switch src {
	case srcConfig:
		s.configPending = false
	case srcVersion:
		receive(s.ver.changed)
	case srcDrift:
		receive(s.ri.modified) // a scripted step: the notification may be coalesced away
	case srcRollout:
		receive(s.ri.rollout)
	case srcRetry:
		receive(s.c.retry.C())
	case srcExpect:
		receive(s.c.expect.C())
	case srcGate:
		receive(s.c.gate.C())
	case srcDoor:
		receive(s.c.door.C())
	case srcResync:
		s.stimulus() // its time has passed
	}
	var before map[DriftKind]float64
	if src == srcDrift {
		before = s.driftCounts()
	}
	s.controller(string(src), func() {
		s.c.handle(s.ctx, wakes[src])
		s.c.afterWake(s.ctx)
	})
	if src == srcDrift {
		s.checkDrift(before)
		s.observed, s.seenOther = nil, 0 // onDrift drained them all
	}
}

// receive takes what ch holds, if anything.
func receive[T any](ch <-chan T) {
	select {
	case <-ch:
	default:
	}
}

// driftCounts reads drift_events_total by kind.
func (s *propSim) driftCounts() map[DriftKind]float64 {
	out := map[DriftKind]float64{}
	for _, k := range []DriftKind{DriftDeleted, DriftModified, DriftMetadata} {
		out[k] = max(s.metric(metrics.Namespace+"_drift_events_total", "kind", string(k)), 0)
	}
	return out
}

// checkDrift: every kind a drain counted as drift (drift_events_total moved
// from before) needs an observation of that kind caused by someone else; an
// own write is never drift.
func (s *propSim) checkDrift(before map[DriftKind]float64) {
	after := s.driftCounts()
	for _, k := range []DriftKind{DriftDeleted, DriftModified, DriftMetadata} {
		recorded, other, own := int(after[k]-before[k]), 0, 0
		for _, o := range s.observed {
			switch {
			case o.kind != k:
			case o.by == byOther:
				other++
			default:
				own++
			}
		}
		if recorded > other {
			s.violate("drift-for-own-write/"+string(k), fmt.Sprintf(
				"onDrift counted %d drift (%s) but only %d of the %d %s observation(s) it drained came from someone else",
				recorded, k, other, other+own, k))
		}
	}
}

// controller runs f, the loop's code for one wake-up, then collects its
// writes.
func (s *propSim) controller(what string, f func()) {
	s.logf("controller handles %s (state %s%s)", what, s.c.State(), s.viewNote())
	f()
	s.drainWatchAs(byController)
	s.handled++
	switch {
	case s.sinceStimulus > requestBudget:
		s.violate("hot-loop", fmt.Sprintf("%d requests since the last outside stimulus (budget %d)", s.sinceStimulus, requestBudget))
	case s.handled > requestBudget:
		s.violate("hot-loop", fmt.Sprintf("%d handlers ran since the last outside stimulus (budget %d)", s.handled, requestBudget))
	}
}

// runToQuiet lets the controller run with the world as it is (refusals
// stay): every event is delivered and every ready source handled, due
// timers included, until nothing is left or a violation stops it.
func (s *propSim) runToQuiet() {
	s.logf("controller runs until quiet")
	for n := 0; len(s.violations) == 0; n++ {
		if n == 1000 {
			s.violate("no-quiet", "still busy after 1000 steps")
			return
		}
		switch r := s.ready(); {
		case len(s.inFlight) > 0:
			s.deliver(len(s.inFlight))
		case len(r) > 0:
			s.dispatch(r[0])
		default:
			return
		}
	}
}

// viewNote tells, for the story, when the controller's view differs from the
// cache: it hides a cached object known to be gone.
func (s *propSim) viewNote() string {
	cached, ok := s.cached()
	if _, visible := s.ri.current(); ok && !visible {
		return ", view hides cached " + string(cached.UID)
	}
	return ""
}

// onTransition records the transitions and checks every entry into Running.
func (s *propSim) onTransition(tr fsm.Transition) {
	note := ""
	if tr.Note != "" {
		note = " (" + tr.Note + ")"
	}
	s.logf("    machine %s --%s--> %s, action %s%s", tr.From, describeEvent(tr.Event), tr.To, tr.Action, note)
	switch e := tr.Event.(type) {
	case fsm.Applied:
		s.recordApply(e.UID, e.Generation)
	case fsm.AppliedUnchanged:
		s.recordApply(e.UID, e.Generation)
	}
	if tr.To == fsm.StateRunning && tr.From != fsm.StateRunning {
		s.checkRunningEntry(tr)
	}
}

// recordApply notes a successful apply: the object it left in place (the
// outcome event names it) at the controller's version.
func (s *propSim) recordApply(uid string, gen int64) {
	s.lastApply = &applyRecord{uid: types.UID(uid), gen: gen, version: s.c.version}
	if n := len(s.applied); n == 0 || s.applied[n-1] != s.c.version {
		s.applied = append(s.applied, s.c.version)
	}
}

// checkRunningEntry: Running means the last successful apply, at the desired
// version, is what is rolled out; when the controller has seen every change by
// someone else, the server must hold exactly that object.
func (s *propSim) checkRunningEntry(tr fsm.Transition) {
	on := describeEvent(tr.Event)
	la := s.lastApply
	if la == nil {
		s.violate("running-without-apply", fmt.Sprintf("%s -> Running on %s with no successful apply ever", tr.From, on))
		return
	}
	if la.version != s.c.version {
		s.violate("running-unapplied-version", fmt.Sprintf(
			"%s -> Running on %s, but the last successful apply (%s gen %d) was for version %s and the desired version is %s",
			tr.From, on, la.uid, la.gen, la.version, s.c.version))
		return
	}
	if rc, ok := tr.Event.(fsm.RolloutComplete); ok && (types.UID(rc.UID) != la.uid || rc.Generation != la.gen) {
		s.violate("running-unapplied-generation", fmt.Sprintf(
			"%s -> Running on %s, but the last successful apply left %s gen %d", tr.From, on, la.uid, la.gen))
		return
	}
	if s.unseenOther > 0 || s.seenOther > 0 || s.lossy {
		return // the server may hold changes the controller cannot know yet
	}
	if s.c.gate.holds() {
		return // it knows of them: their repair waits for the repair gate's backoff
	}
	srv := s.stored()
	switch {
	case srv == nil:
		s.violate("running-without-daemonset", fmt.Sprintf(
			"%s -> Running on %s (last apply: %s gen %d), but the server has no DaemonSet and nobody else touched it",
			tr.From, on, la.uid, la.gen))
	case srv.UID != la.uid || srv.Generation != la.gen:
		s.violate("running-other-object", fmt.Sprintf(
			"%s -> Running on %s (last apply: %s gen %d), but the server holds %s", tr.From, on, la.uid, la.gen, describeDS(srv)))
	case missingOwnedLabel(srv) != "":
		s.violate("running-damaged-metadata", fmt.Sprintf(
			"%s -> Running on %s, but the server's DaemonSet lacks label %s", tr.From, on, missingOwnedLabel(srv)))
	}
}

// ---- settling and the final invariants ----

// settle lets the world calm down without the resync: the API heals, every
// event is delivered and handled, retries fire, rollouts finish. Nothing is
// lost in this simulation, so the controller must converge without a resync.
func (s *propSim) settle() bool {
	for _, v := range []string{"create", "update", "delete"} {
		s.setRefused(v, false)
	}
	for range 100 {
		if len(s.violations) > 0 {
			return false
		}
		switch {
		case len(s.inFlight) > 0:
			s.deliver(len(s.inFlight))
		case len(s.ready()) > 0:
			r := s.ready()
			s.dispatch(r[s.rng.IntN(len(r))])
		case s.timerDue():
		default:
			if ds := s.stored(); ds != nil && s.statusBehind(ds) {
				s.stimulus()
				s.rollOut()
				continue
			}
			return true
		}
	}
	s.violate("no-settle", "still busy after 100 settle steps")
	return false
}

// timerDue moves the clock to the loop's next timer, if one is armed.
func (s *propSim) timerDue() bool {
	at, ok := s.nextTimer()
	if ok {
		s.advanceTo(at, "the loop's next timer")
	}
	return ok
}

// expireExpectations lets the time of a resync period pass for the
// manager's expectations: an own write the cache never showed is no longer
// trusted (in the product, the expectation timer re-asserts then).
func (s *propSim) expireExpectations() {
	s.clock.SetTime(s.clock.Now().Add(10 * resources.ExpectationTimeout))
}

func (s *propSim) settleAndCheck() {
	s.logf("--- settle (no resync) ---")
	if !s.settle() {
		return
	}
	if s.cfg.invalid {
		if !s.checkHonest("while the config is invalid") {
			return
		}
		s.logf("--- the admin fixes insights-config (the same value) ---")
		s.cfg.invalid, s.cfg.good = false, true
		s.configPending = true
		if !s.settle() {
			return
		}
	}
	if s.lossy {
		s.logf("--- resync (a relist lost someone else's change) ---")
		s.expireExpectations()
		s.dispatch(srcResync)
		if !s.settle() {
			return
		}
	}
	if !s.checkConverged("after settling") {
		return
	}
	s.logf("--- resync ---")
	writes := s.controllerWrites
	s.expireExpectations()
	s.dispatch(srcResync)
	if !s.settle() {
		return
	}
	if s.controllerWrites != writes {
		s.violate("resync-writes", fmt.Sprintf("a resync of the converged state wrote %d time(s)", s.controllerWrites-writes))
		return
	}
	if s.checkConverged("after a resync") {
		s.checkFreshAgrees()
	}
}

func (s *propSim) checkConverged(when string) bool {
	n := len(s.violations)
	if !s.checkHonest(when) {
		return false
	}
	state, srv := s.c.State(), s.stored()
	if s.cfg.disabled {
		switch {
		case state != fsm.StateDisabled:
			s.violate("final-state", fmt.Sprintf("%s: disabled but state %s", when, state))
		case srv != nil:
			s.violate("final-leftover", fmt.Sprintf("%s: disabled but the server has %s", when, describeDS(srv)))
		}
		return len(s.violations) == n
	}
	want := s.ver.Version()
	switch {
	case state != fsm.StateRunning:
		s.violate("final-state", fmt.Sprintf("%s: enabled but state %s (server: %s)", when, state, describeDS(srv)))
	case srv == nil:
		s.violate("final-missing", fmt.Sprintf("%s: enabled and Running but the server has no DaemonSet", when))
	case missingOwnedLabel(srv) != "":
		s.violate("final-metadata-not-restored", fmt.Sprintf("%s: Running but the server's DaemonSet still lacks label %s", when, missingOwnedLabel(srv)))
	case srv.Annotations[resources.VersionAnnotation] != want:
		s.violate("final-version", fmt.Sprintf("%s: Running but the server's DaemonSet is at version %q, want %q", when, srv.Annotations[resources.VersionAnnotation], want))
	case !specDesired(srv, want):
		s.violate("final-spec", fmt.Sprintf("%s: Running but the server's DaemonSet spec is not exactly the desired one (%s)", when, describeDS(srv)))
	case !resources.RolloutOf(srv).Complete():
		s.violate("final-rollout", fmt.Sprintf("%s: Running but %s is not rolled out", when, describeDS(srv)))
	}
	return len(s.violations) == n
}

// specDesired: ds's spec is exactly the desired one as the server stores it
// (with its defaults); an addition is a difference.
func specDesired(ds *appsv1.DaemonSet, version string) bool {
	want, err := resources.DesiredDaemonSet(resources.Desired{Images: resources.DefaultImages(), Version: version})
	if err != nil {
		return false
	}
	fakeapi.ApplyDefaults(want)
	return equality.Semantic.DeepEqual(want.Spec, ds.Spec)
}

// checkHonest: the conditions and the state metric say nothing the cluster
// contradicts: no "disabled" while a DaemonSet is there.
func (s *propSim) checkHonest(when string) bool {
	n := len(s.violations)
	deg := status.Conditions(s.c.snapshot())[2]
	for _, r := range status.DegradedReasons {
		want := 0.0
		if deg.Status == "True" && deg.Reason == r {
			want = 1
		}
		if v := s.metric("runtime_extractor_degraded", "reason", r); v != want {
			s.violate("metric-degraded", fmt.Sprintf("%s: runtime_extractor_degraded{reason=%s} is %v, but Degraded is %s [%s]", when, r, v, deg.Status, deg.Reason))
		}
	}
	srv := s.stored()
	if srv == nil {
		return len(s.violations) == n
	}
	if c := status.Conditions(s.c.snapshot())[0]; c.Reason == status.ReasonDisabled {
		s.violate("status-disabled-with-daemonset", fmt.Sprintf("%s: %s=%s [%s] %q, but the server has %s",
			when, c.Type, c.Status, c.Reason, c.Message, describeDS(srv)))
	}
	if v := s.stateMetric(string(fsm.StateDisabled)); v == 1 {
		s.violate("metric-disabled-with-daemonset", fmt.Sprintf("%s: runtime_extractor_state{state=Disabled} is 1, but the server has %s", when, describeDS(srv)))
	}
	return len(s.violations) == n
}

// metric reads the gauge name{label=value} from the simulator's registry;
// label "" reads the unlabelled one; -1 when absent.
func (s *propSim) metric(name, label, value string) float64 {
	v, err := gatherGauge(s.reg, name, label, value)
	s.must(err)
	return v
}

// gauge reads an unlabelled gauge from the simulator's registry.
func (s *propSim) gauge(name string) float64 {
	v := s.metric(name, "", "")
	if v < 0 {
		s.t.Fatalf("no gauge %s", name)
	}
	return v
}

// stateMetric reads runtime_extractor_state{state} (-1 when absent).
func (s *propSim) stateMetric(state string) float64 {
	return s.metric(metrics.Namespace+"_state", "state", state)
}

// gatherGauge reads the gauge (or counter) name from reg: the series whose
// label has value, or, with label "", the one without labels; -1 when absent.
func gatherGauge(reg prometheus.Gatherer, name, label, value string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			read := func() float64 {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
			if label == "" && len(m.GetLabel()) == 0 {
				return read(), nil
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return read(), nil
				}
			}
		}
	}
	return -1, nil
}

// checkFreshAgrees starts a second controller process over the same cluster
// and config, lets it settle, and compares its conditions with those of the
// controller that ran the whole history: status is a function of the cluster.
func (s *propSim) checkFreshAgrees() {
	f := &propSim{
		t: s.t, abort: s.abort, seed: s.seed, rng: rand.New(rand.NewPCG(uint64(s.seed), 0xf7e5)), ctx: s.ctx, rec: s.rec,
		api: s.api, cfg: &flipConfig{disabled: s.cfg.disabled, invalid: s.cfg.invalid, good: !s.cfg.invalid},
		ver: newSettableVersion(s.ver.Version()), refused: map[string]bool{}, nodes: s.nodes, held: s.held,
		clock: clocktesting.NewFakeClock(s.clock.Now()),
	}
	w, err := s.api.Client.Tracker().Watch(fakeapi.DaemonSets, resources.Namespace)
	s.must(err)
	f.watcher = w
	f.restart()
	defer f.close()
	if !f.settle() {
		s.violate("fresh-no-settle", "a freshly started controller did not settle:\n"+strings.Join(f.log, "\n"))
		return
	}
	if f.controllerWrites > 0 {
		s.violate("fresh-writes", fmt.Sprintf("a freshly started controller wrote %d time(s) over the converged cluster:\n%s", f.controllerWrites, strings.Join(f.log, "\n")))
		return
	}
	long, fresh := status.Conditions(s.c.snapshot()), status.Conditions(f.c.snapshot())
	for i := range long {
		a, b := long[i], fresh[i]
		if a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message {
			s.violate("fresh-conditions-differ", fmt.Sprintf("%s: the long-running controller (state %s) reports %s [%s] %q, a fresh one (state %s) %s [%s] %q",
				a.Type, s.c.State(), a.Status, a.Reason, a.Message, f.c.State(), b.Status, b.Reason, b.Message))
		}
	}
}

func missingOwnedLabel(ds *appsv1.DaemonSet) string {
	for _, k := range slices.Sorted(maps.Keys(resources.OwnedLabels())) {
		if ds.Labels[k] != resources.OwnedLabels()[k] {
			return k
		}
	}
	return ""
}

// ---- helpers ----

func (s *propSim) stored() *appsv1.DaemonSet {
	ds, err := s.api.Stored(resources.Namespace, resources.DaemonSetName)
	s.must(err)
	return ds
}

// cached is the informer cache as it is (not the controller's view, which
// hides objects known to be gone): what processDeltas and Replace compare with.
func (s *propSim) cached() (*appsv1.DaemonSet, bool) {
	_, ds, err := s.ri.cachedObject()
	s.must(err)
	return ds, ds != nil
}

func (s *propSim) violate(kind, msg string) {
	s.violations = append(s.violations, violation{kind, msg})
	s.logf("!!! VIOLATION %s: %s", kind, msg)
}

func (s *propSim) must(err error) {
	if err != nil {
		s.abort(fmt.Sprintf("seed %d: %v\n%s", s.seed, err, s.story()))
	}
}

func (s *propSim) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(line, "    ") {
		s.lines++
		line = fmt.Sprintf("%3d. %s", s.lines, line)
	}
	s.log = append(s.log, line)
}

func (s *propSim) story() string {
	return fmt.Sprintf("seed %d:\n%s", s.seed, strings.Join(s.log, "\n"))
}

// describeEvent is fsm.Describe with the object's UID where the event names one.
func describeEvent(e fsm.Event) string {
	switch e := e.(type) {
	case fsm.RolloutComplete:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	case fsm.Applied:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	case fsm.AppliedUnchanged:
		return fmt.Sprintf("%s(%s gen=%d)", e.Name(), e.UID, e.Generation)
	}
	return fsm.Describe(e)
}

// describeDS renders a DaemonSet as the story needs it.
func describeDS(ds *appsv1.DaemonSet) string {
	if ds == nil {
		return "<none>"
	}
	var notes []string
	if resources.RolloutOf(ds).Complete() {
		notes = append(notes, "rolled out")
	}
	if k := missingOwnedLabel(ds); k != "" {
		notes = append(notes, "no label "+k)
	}
	if len(ds.Spec.Template.Spec.Containers) > 0 && strings.Contains(ds.Spec.Template.Spec.Containers[0].Image, "someone") {
		notes = append(notes, "foreign image")
	}
	if ds.Spec.MinReadySeconds > 0 {
		notes = append(notes, fmt.Sprintf("minReadySeconds %d", ds.Spec.MinReadySeconds))
	}
	if len(ds.Spec.Template.Spec.Containers) > 0 && !strings.Contains(ds.Spec.Template.Spec.Containers[0].Image, "someone") &&
		ds.Spec.MinReadySeconds == 0 && !specDesired(ds, "") {
		notes = append(notes, "spec differs")
	}
	if n := ds.Status.NumberUnavailable; n > 0 {
		notes = append(notes, fmt.Sprintf("%d unavailable", n))
	}
	return fmt.Sprintf("%s gen %d v%s [%s]", ds.UID, ds.Generation, ds.Annotations[resources.VersionAnnotation], strings.Join(notes, ", "))
}
